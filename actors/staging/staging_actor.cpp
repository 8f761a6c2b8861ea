#include "actors/staging/staging_actor.hpp"

#include <span>
#include <string>

#include <caf/actor_cast.hpp>
#include <caf/mailbox_element.hpp>

#include "actors/base/guard.hpp"
#include "actors/base/log.hpp"

namespace kvferry {

namespace {

using self_ptr = staging_actor::stateful_pointer<staging_state>;

std::string who(self_ptr self) {
  return "[staging " + to_string(self->state.cfg.self) + "]";
}

/// Tells every writer that asked here how far the ring was consumed, if that
/// moved since they were last told.
void tell_watermark(self_ptr self) {
  auto& st = self->state;
  if (st.figures)
    st.figures->in_use(st.book->ring_in_use());
  auto now = st.book->watermark();
  if (now == st.told)
    return;
  st.told = now;
  for (auto& [addr, writer] : st.writers)
    self->send(writer, staging_watermark{st.cfg.self, now});
}

/// Runs a scatter: the writer's block in the ring into the room's pages,
/// every piece checked against the ring and its KV buffer. A piece that does
/// not fit fails the room (nothing was copied past the bad piece's buffer).
failure run_scatter(self_ptr self, const staging_book::scatter& s) {
  auto& st = self->state;
  auto& pool = st.cfg.pool;
  auto lists = segments_by_buffer(s.copies, pool.kv_bases.size(), s.ring_offset, false);
  std::span<const std::byte> ring{st.cfg.ring, st.cfg.ring_size};
  for (size_t b = 0; b < lists.size(); ++b) {
    if (lists[b].empty())
      continue;
    std::span<std::byte> buffer{pool.kv_bases[b], pool.layout.kv_buffers[b].length};
    if (auto rc = pool.copy_segments(buffer, ring, lists[b]); !rc.ok())
      return failure{errc::internal,
                     "scatter failed: into KV buffer " + std::to_string(b) + ": " + rc.message(),
                     st.cfg.self};
  }
  ++st.scatters;
  return {};
}

caf::result<staging_grant> answer(self_ptr self, const staging_ask& a) {
  auto r = self->state.book->ask(a);
  if (auto& figures = self->state.figures)
    figures->in_use(self->state.book->ring_in_use());
  if (auto* f = std::get_if<failure>(&r)) {
    log().warn("{} {}: {}", who(self), to_string(a.key), to_string(*f));
    return to_error(*f);
  }
  return std::get<staging_grant>(r);
}

void arm_sweep(self_ptr self) {
  auto& st = self->state;
  if (st.sweep_armed || st.waiting.empty())
    return;
  st.sweep_armed = true;
  self->delayed_send(self, st.cfg.ask_wait / 4 + std::chrono::milliseconds{1}, sweep_atom_v);
}

/// An exception escaped a handler: the room its message concerned fails at
/// the decode rank at once, by the path a failed scatter takes (a chunk, or
/// the opening of a room, that could not be handled); an ask or a close gets
/// the failure back as its error (the writer fails its room with it); a sweep
/// that threw refuses every parked ask with it. The actor carries on.
failure on_exception(self_ptr self, const std::string& what) {
  auto& st = self->state;
  log().error("{} exception in a handler: {}", who(self), what);
  failure why{errc::internal,
              "exception in the staging actor of " + to_string(st.cfg.self) + ": " + what,
              st.cfg.self};
  auto* element = self->current_mailbox_element();
  if (!element)
    return why;
  auto& msg = element->content();
  auto rank = caf::actor_cast<decode_rank_actor>(self->current_sender());
  if (msg.match_elements<chunk_landed>()) {
    if (rank)
      self->send(rank, chunk_scattered{msg.get_as<chunk_landed>(0), why});
  } else if (msg.match_elements<staging_room>()) {
    chunk_landed opening;
    opening.key = msg.get_as<staging_room>(0).key;
    if (rank)
      self->send(rank, chunk_scattered{opening, why});
  } else if (msg.match_elements<sweep_atom>()) {
    for (auto& [key, parked] : st.waiting)
      parked.promise.deliver(to_error(why));
    st.waiting.clear();
  }
  return why;
}

/// A writer asks for ring space: granted now for a room the book knows,
/// else parked until the room opens (or the sweep gives up on it).
caf::result<staging_grant> on_ask(self_ptr self, staging_ask& a) {
  auto& st = self->state;
  auto writer = caf::actor_cast<transfer_actor>(self->current_sender());
  if (writer && st.writers.emplace(writer.address(), writer).second)
    self->monitor(writer);  // forgotten when it goes
  if (st.book->knows(a.key))
    return answer(self, a);
  if (st.figures)
    st.figures->waited();
  auto promise = self->make_response_promise<staging_grant>();
  st.waiting.emplace(a.key, staging_state::parked{a, promise, self->clock().now()});
  arm_sweep(self);
  return promise;
}

/// A room opens for staging: the asks parked for it are answered.
void on_room(self_ptr self, staging_room& room) {
  auto& st = self->state;
  auto key = room.key;
  st.book->open(std::move(room));
  auto [first, last] = st.waiting.equal_range(key);
  for (auto i = first; i != last; ++i) {
    auto r = st.book->ask(i->second.ask);
    if (auto* f = std::get_if<failure>(&r))
      i->second.promise.deliver(to_error(*f));
    else
      i->second.promise.deliver(std::get<staging_grant>(r));
  }
  st.waiting.erase(first, last);
}

/// A room closes: asks still parked for it fail, its space is freed.
caf::result<staging_close> on_close(self_ptr self, staging_close& msg) {
  auto& st = self->state;
  auto [first, last] = st.waiting.equal_range(msg.key);
  for (auto i = first; i != last; ++i)
    i->second.promise.deliver(
        make_error(errc::unknown_room, to_string(msg.key) + " closed before it staged"));
  st.waiting.erase(first, last);
  if (st.book->close(msg.key))
    tell_watermark(self);
  return msg;
}

/// A staged chunk landed in the ring: scattered into the pool, and the rank
/// told how that went.
void on_landed(self_ptr self, chunk_landed& msg) {
  auto& st = self->state;
  auto rank = caf::actor_cast<decode_rank_actor>(self->current_sender());
  auto r = st.book->arrive(msg);
  if (auto* f = std::get_if<failure>(&r)) {
    log().warn("{} {}: {}", who(self), to_string(msg.key), to_string(*f));
    self->send(rank, chunk_scattered{msg, *f});
    return;
  }
  auto why = run_scatter(self, std::get<staging_book::scatter>(r));
  if (why)
    log().error("{} {}: {}", who(self), to_string(msg.key), why.cause);
  self->send(rank, chunk_scattered{msg, why});
  tell_watermark(self);
}

/// Asks parked longer than ask_wait fail: their room was never opened here.
void on_sweep(self_ptr self) {
  auto& st = self->state;
  st.sweep_armed = false;
  auto now = self->clock().now();
  for (auto i = st.waiting.begin(); i != st.waiting.end();) {
    if (now - i->second.since < st.cfg.ask_wait) {
      ++i;
      continue;
    }
    auto& a = i->second.ask;
    auto why =
        failure{errc::unknown_room,
                "staging space asked for " + to_string(a.key) + " by " + to_string(a.writer) +
                    ", which was not opened for staging on " + to_string(st.cfg.self) + " within " +
                    std::to_string(st.cfg.ask_wait.count()) + " ms",
                st.cfg.self};
    log().warn("{} {}", who(self), why.cause);
    i->second.promise.deliver(to_error(why));
    i = st.waiting.erase(i);
  }
  arm_sweep(self);
}

}  // namespace

staging_actor::behavior_type staging(staging_actor::stateful_pointer<staging_state> self,
                                     staging_config cfg) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.book = std::make_unique<staging_book>(st.cfg.pool.layout, st.cfg.self, st.cfg.ring_size);
  if (st.cfg.metrics)
    st.figures =
        std::make_unique<metrics::staging_figures>(st.cfg.metrics, st.cfg.self, st.cfg.ring_size);
  self->set_down_handler([self](caf::down_msg& m) { self->state.writers.erase(m.source); });
  return guarded<staging_actor::behavior_type>(
      self, on_exception,
      [self](staging_ask& a) -> caf::result<staging_grant> { return on_ask(self, a); },
      [self](staging_room& room) { on_room(self, room); },
      [self](staging_close& msg) -> caf::result<staging_close> { return on_close(self, msg); },
      [self](chunk_landed& msg) { on_landed(self, msg); }, [self](sweep_atom) { on_sweep(self); });
}

}  // namespace kvferry
