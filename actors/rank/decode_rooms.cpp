// A decode room's life, in the order it runs: opened by the scheduler (and
// what it needs started: the prefill instance's handshake, the decider's
// key), joined at the decider, initialized with its destination pages,
// requested from each source rank, its chunks counted as they land (staged
// ones scattered first), finished, and concluded by the decider's verdict or
// its deadline; cleared by the scheduler. Prefill instances (found, shaken
// hands with, lost) are decode_handshake.cpp's and decode_peers.cpp's.
#include <caf/actor_cast.hpp>

#include "actors/base/guard.hpp"
#include "actors/base/log.hpp"
#include "actors/plan/room_grant.hpp"
#include "actors/plan/tp_mapping.hpp"
#include "actors/rank/decider_side.hpp"
#include "actors/rank/decode_rank.hpp"
#include "actors/rank/decode_rank_steps.hpp"
#include "actors/rank/rank_guard.hpp"
#include "actors/rank/room_steps.hpp"
#include "messages/room.hpp"
#include "messages/scheduler.hpp"

namespace kvferry::decode_steps {

// -- the scheduler's calls ------------------------------------------------------

/// The scheduler opened room `id`, whose prefill instance is at `where`.
void open_room(self_ptr self, uint64_t id, const bootstrap_locator& where, room_slot_ptr slot) {
  auto& st = self->state;
  if (refuse_reopen(st.rooms, id, slot, st.cfg.self))
    return;
  auto key = where.key();
  auto& room =
      st.rooms
          .try_emplace(id, id, std::move(slot), key, st.cfg.self, st.cfg.pool.layout, st.cfg.limits)
          .first->second;
  auto [p, fresh] = st.peers.try_emplace(key);
  if (fresh)
    p->second.where = where;
  join(self, room);
  switch (p->second.phase) {
    case prefill_peer::stage::ready:
      advance(self, room);
      break;
    case prefill_peer::stage::refused:
      report(self, room, p->second.refusal);
      break;
    case prefill_peer::stage::down:
      fail_fast(self, room, p->second);
      break;
    case prefill_peer::stage::resolving:
      start_resolve(self, key);
      break;
  }
  sync(self, room);
}

/// The scheduler's init of a room: where its KV, aux row and states go.
caf::result<void> init_room(self_ptr self, receiver_init& msg) {
  auto i = self->state.rooms.find(msg.room);
  if (i == self->state.rooms.end())
    return unknown_room(self->state.cfg.self, msg.room);
  auto& room = i->second;
  if (auto bad = room.init(std::move(msg.dst_pages), msg.aux_slot, std::move(msg.states),
                           msg.prefix_tokens)) {
    report(self, room, std::move(*bad));
    return caf::unit;
  }
  // Cleared before any write can come: a stale row never passes the check.
  if (room.aux_slot() != no_aux_slot)
    write_stamp(self->state.cfg.pool, room.aux_slot(), room_key{});
  advance(self, room);
  sync(self, room);
  return caf::unit;
}

/// The scheduler is done with room `id`: it leaves, and its pages go back
/// once nothing more can land in them.
caf::result<void> clear_room(self_ptr self, uint64_t id) {
  auto& st = self->state;
  auto* cleared = room_to_clear(self, id, "the decode scheduler", report);
  if (!cleared)
    return unknown_room(st.cfg.self, id);
  auto& room = *cleared;
  if (st.registered)
    self->send(st.decider, room_leave{room.key(), st.cfg.self});
  // Cleared before its verdict: nothing more may land in its pages.
  if (!room.fsm().terminal() || !room.slot() || !room.slot()->released())
    if (!st.draining.contains(room.key().generation))
      release(self, room);
  st.room_deadlines.disarm(id);
  st.rooms.erase(id);
  st.finish_told.erase(id);
  return caf::unit;
}

// -- the room's progress -------------------------------------------------------

void sync(self_ptr self, decode_room& room) {
  publish(self, room.slot(), room.key(), room.fsm());
}

namespace {

void send_requests(self_ptr self, decode_room& room);

}  // namespace

void settle(self_ptr self, decode_room& room, kv_poll outcome, const failure& why) {
  bool was = room.fsm().terminal();
  conclude(self, self->state.cfg.self, room, outcome, why);
  if (!was && room.fsm().terminal())
    release(self, room);
}

void report(self_ptr self, decode_room& room, failure why) {
  auto& fsm = room.fsm();
  auto& st = self->state;
  if (fsm.terminal())
    return;
  if (fsm.awaiting_verdict()) {
    // Its part is done (or its first cause reported): a fault seen now still
    // concerns the room, and the decider keeps the first cause it got.
    if (st.registered)
      self->send(st.decider, room_failure{room.key(), std::move(why)});
    return;
  }
  if (!st.registered) {
    settle(self, room, kv_poll::failed, why);
    return;
  }
  log().info("{} {}: reporting to the decider: {}", who(self), to_string(room.key()),
             to_string(why));
  note(self, room.key(), "reported to the decider", to_string(why));
  self->send(st.decider, room_failure{room.key(), why});
  room.set_reported(std::move(why));
  fsm.await_verdict();
  sync(self, room);
}

void join(self_ptr self, decode_room& room) {
  auto& st = self->state;
  if (!st.registered)
    return;
  auto p = st.peers.find(room.peer());
  auto j = room.next_join(st.cfg.self,
                          p != st.peers.end() ? p->second.everyone : std::vector<participant>{});
  if (!j)
    return;
  self->send(st.decider, std::move(*j));
  if (room.begin_watch())
    watch_decider(self, st.decider, decider_ref(st.cfg.self.instance));
}

namespace {

/// Opens the room's fence to its writing sources (and its ring, if one
/// stages), opens it on the staging actor, then asks every source.
void send_requests(self_ptr self, decode_room& room) {
  auto& st = self->state;
  auto& peer = st.peers.at(room.peer());
  granted_ring ring;
  if (room.stages() && st.cfg.staging.offered())
    ring = {st.cfg.staging.region, st.cfg.staging.size};
  st.cfg.net->open_fence(room.key().generation,
                         room_grant(st.cfg.pool.layout, room.writers(), room.dst_pages(),
                                    room.aux_slot(), room.states(), ring));
  if (auto staged = room.staging_open(); !staged.writers.empty()) {
    self->send(st.cfg.staging.handle, std::move(staged));
    room.mark_staged();
  }
  for (auto& ask : room.requests(st.cfg.self, st.decider))
    self->send(peer.handles.at(ask.to), std::move(ask.request));
  room.mark_requested();
}

}  // namespace

void advance(self_ptr self, decode_room& room) {
  if (room.fsm().terminal() || room.fsm().awaiting_verdict())
    return;
  auto p = self->state.peers.find(room.peer());
  if (p == self->state.peers.end() || p->second.phase != prefill_peer::stage::ready)
    return;
  if (!room.has_sources())
    room.set_sources(p->second.sources);
  join(self, room);
  if (!room.ready_to_request())
    return;
  room.fsm().advance(kv_poll::waiting_for_input);
  if (room.initialized() && !room.requested())
    send_requests(self, room);
  sync(self, room);
}

/// Every source delivered: the rank has finished its part if the aux row is
/// the room's; the decider gets the word either way.
void maybe_finish(self_ptr self, decode_room& room) {
  if (room.finished() || !room.all_sources_done())
    return;
  auto& st = self->state;
  if (room.aux_slot() != no_aux_slot) {
    auto stamp = read_stamp(st.cfg.pool, room.aux_slot());
    if (stamp != room.key()) {
      report(self, room,
             failure{errc::aux_mismatch,
                     "aux row " + std::to_string(room.aux_slot()) + " carries " + to_string(stamp) +
                         ", expected " + to_string(room.key()),
                     st.cfg.self});
      return;
    }
  }
  room.mark_finished();
  // Other participants may still be writing: it waits as long as a transfer may take.
  tell_finished(self, room, st.decider);
  sync(self, room);
}

/// A chunk's bytes are in the room's pages (written there, or scattered).
void on_landed(self_ptr self, decode_room& room, const chunk_landed& msg) {
  note(self, room.key(),
       "chunk " + std::to_string(msg.chunk) + " landed from " + to_string(msg.prefill_rank) + " (" +
           std::to_string(msg.pages) + " pages" + (msg.staged ? ", staged)" : ")"));
  auto& st = self->state;
  if (st.cfg.checksum != kv_checksum::off)
    if (auto bad = room.check_digests(msg, st.cfg.pool.kv_bases)) {
      log().warn("{} {}", who(self), to_string(*bad));
      report(self, room, std::move(*bad));
      return;
    }
  if (auto bad = room.landed(msg)) {
    report(self, room, std::move(*bad));
    return;
  }
  maybe_finish(self, room);
  sync(self, room);
}

decode_room* find(self_ptr self, const room_key& key) {
  auto i = self->state.rooms.find(key.room);
  if (i == self->state.rooms.end() || i->second.key().generation != key.generation)
    return nullptr;
  return &i->second;
}

/// The decider of a room once it joined (null before).
decider_actor decider_of(self_ptr self, const decode_room& room) {
  return room.joined() ? self->state.decider : decider_actor{};
}

/// A room's deadline fired (unless it moved on since: `epoch`).
void on_deadline(self_ptr self, uint64_t id, uint64_t epoch) {
  auto& st = self->state;
  auto i = st.rooms.find(id);
  if (i == st.rooms.end() || !i->second.fsm().is_current(epoch))
    return;
  auto& room = i->second;
  if (room.fsm().awaiting_verdict()) {
    auto decider = st.registered ? st.decider : decider_actor{};
    verdict_overdue(
        self, room, decider,
        [&](const failure& why) {
          self->send(decider, room_failure{room.key(), why});
          sync(self, room);
        },
        [&](const failure& why) { settle(self, room, kv_poll::failed, why); },
        [&] { sync(self, room); });
    return;
  }
  if (!st.registered) {
    // The decider never answered this rank: the room concludes here with the
    // words every rank uses for a silent decider.
    log().warn("{} {}, and the decider of {} never answered", who(self),
               room.fsm().stuck_cause(room.key()), st.cfg.self.instance);
    auto why = decider_lost(decider_ref(st.cfg.self.instance));
    settle(self, room, kv_poll::failed, why);
    if (st.decider)
      self->send(st.decider, room_failure{room.key(), why});
    return;
  }
  failure why{errc::deadline, room.fsm().stuck_cause(room.key()), st.cfg.self};
  if (auto p = st.peers.find(room.peer()); p != st.peers.end() &&
                                           p->second.phase == prefill_peer::stage::resolving &&
                                           !p->second.last_error.empty()) {
    why.code = errc::bootstrap_unreachable;
    why.cause += " (prefill instance at " + room.peer() + ": " + p->second.last_error + ")";
  }
  report(self, room, std::move(why));
}

/// A prefill rank says a chunk of a room landed (in its pages, or in the
/// staging ring: then it counts once scattered).
void on_chunk(self_ptr self, const chunk_landed& msg) {
  auto& st = self->state;
  if (auto old = st.incarnations_seen.stale(msg.prefill_rank, st.cfg.self)) {
    log().warn("{} ignored chunk {} of {}: {}", who(self), msg.chunk, to_string(msg.key),
               old->cause);
    return;
  }
  auto* room = find(self, msg.key);
  if (!room || room->fsm().terminal() || room->fsm().awaiting_verdict())
    return;  // stale (another generation), decided, or already reported
  // (A chunk with no pages carries states and the aux row only: never staged.)
  if (msg.pages > 0 && msg.staged != room->staged_from(msg.prefill_rank)) {
    report(self, *room,
           failure{errc::invalid_chunk,
                   "chunk " + std::to_string(msg.chunk) + " of " + to_string(msg.key) + " from " +
                       to_string(msg.prefill_rank) +
                       (msg.staged ? " came staged, but this source does not stage"
                                   : " came unstaged, but this source stages"),
                   st.cfg.self});
    return;
  }
  if (msg.staged) {
    self->send(st.cfg.staging.handle, msg);
    room->fsm().touch();
    return;
  }
  on_landed(self, *room, msg);
}

/// The staging actor scattered a staged chunk into the room's pages (or
/// could not: `why`).
void on_scattered(self_ptr self, chunk_scattered& msg) {
  auto* room = find(self, msg.landed.key);
  if (!room || room->fsm().terminal() || room->fsm().awaiting_verdict())
    return;
  if (msg.why) {
    report(self, *room, std::move(msg.why));
    return;
  }
  on_landed(self, *room, msg.landed);
}

/// The decider keyed a join of a room.
void on_keyed(self_ptr self, const room_keyed& msg) {
  auto i = self->state.rooms.find(msg.key.room);
  if (i == self->state.rooms.end())
    return;
  i->second.key_received();
  i->second.set_generation(msg.key.generation);
  heard_from_sender(self);
  advance(self, i->second);
  sync(self, i->second);
}

void on_verdict(self_ptr self, const room_verdict& msg) {
  if (!from(self, self->state.decider.address(), who(self), "a verdict"))
    return;
  heard_from_sender(self);
  auto i = self->state.rooms.find(msg.key.room);
  if (i == self->state.rooms.end())
    return;
  auto& room = i->second;
  // Only for the room's own key: the decider keys a join before any verdict
  // of it, so a verdict for a room not keyed yet is of an older generation of
  // its id (sent again), and must not become its key.
  if (room.keyed() && room.key() == msg.key) {
    note(self, msg.key, "verdict " + to_string(msg.outcome) + " from the decider",
         msg.outcome == kv_poll::failed ? to_string(msg.why) : std::string{});
    settle(self, room, msg.outcome, msg.why);
    forget_after_verdict(self, room, msg.why);
  }
}

failure on_exception(self_ptr self, const std::string& what) {
  return fail_live_rooms(self, what,
                         [](self_ptr s, auto& room, const failure& why) { report(s, room, why); });
}

}  // namespace kvferry::decode_steps
