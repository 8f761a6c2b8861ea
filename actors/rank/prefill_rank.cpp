// The prefill rank actor's room side: rooms, the scheduler's calls, the
// transfer actor's results and the rooms' deadlines. Its peers (decode ranks,
// deciders, the bootstrap) are prefill_peers.cpp's.
#include "actors/rank/prefill_rank.hpp"

#include <chrono>

#include "actors/base/log.hpp"
#include "actors/rank/decider_side.hpp"
#include "actors/rank/prefill_rank_steps.hpp"
#include "actors/rank/rank_guard.hpp"
#include "actors/rank/room_steps.hpp"
#include "messages/scheduler.hpp"
#include "messages/transfer.hpp"

namespace kvferry {

namespace prefill_steps {

namespace {

/// This rank's part of the room is done: the decider hears it; the verdict
/// comes once every participant is done.
void finish(self_ptr self, prefill_room& room) {
  auto& st = self->state;
  auto d = st.deciders.find(room.id());
  if (room.fsm().terminal() || room.fsm().awaiting_verdict() || d == st.deciders.end())
    return;
  tell_finished(self, room, d->second);
  sync(self, room);
}

}  // namespace

/// Mirrors the room's state into its published slot and schedules its
/// deadline; a concluded room with no write in flight releases its pages.
void sync(self_ptr self, prefill_room& room) {
  publish(self, room.slot(), room.key(), room.fsm());
  if (room.fsm().terminal() && room.in_flight() == 0 && room.slot())
    room.slot()->release();
}

/// Concludes a room with the decider's verdict (or alone), and releases its
/// source pages once no write of it is in flight.
void settle(self_ptr self, prefill_room& room, kv_poll outcome, const failure& why) {
  conclude(self, self->state.cfg.self, room, outcome, why);
  sync(self, room);
}

/// The room's decider was lost: this rank concludes without a verdict, and
/// tells the other ranks of the instance, which may hold the room with no
/// decode rank asking (their own deadline would word it otherwise).
void settle_without_decider(self_ptr self, prefill_room& room, const failure& why) {
  settle(self, room, kv_poll::failed, why);
  for (auto& s : self->state.siblings)
    self->send(s, sibling_concluded{room.id(), why});
}

/// A fault this rank saw in a room: the room's decider decides; without one
/// (no decode rank has asked for the room yet) the rank concludes alone.
void report(self_ptr self, prefill_room& room, failure why) {
  auto& fsm = room.fsm();
  if (fsm.terminal() || fsm.awaiting_verdict())
    return;  // the first root cause was already reported
  auto d = self->state.deciders.find(room.id());
  if (d == self->state.deciders.end()) {
    settle(self, room, kv_poll::failed, why);
    return;
  }
  log().info("{} {}: reporting to its decider: {}", who(self), to_string(room.key()),
             to_string(why));
  note(self, room.key(), "reported to the decider", to_string(why));
  self->send(d->second, room_failure{room.key(), why});
  room.set_reported(std::move(why));
  fsm.await_verdict();
  sync(self, room);
}

/// Hands every chunk that can go now to the transfer actor.
void dispatch(self_ptr self, prefill_room& room) {
  auto jobs = room.take_jobs();
  if (!jobs.empty() || (room.bound() && room.pages_accepted() > 0))
    room.fsm().advance(kv_poll::transferring);
  for (auto& job : jobs)
    self->send(self->state.cfg.transfer, std::move(job));
  if (room.done())
    finish(self, room);  // a rank whose destinations are all dummies writes nothing
  sync(self, room);
}

namespace {

/// The decider of a room (null while no decode rank asked for it).
decider_actor decider_of(self_ptr self, const prefill_room& room) {
  auto d = self->state.deciders.find(room.id());
  return d == self->state.deciders.end() ? decider_actor{} : d->second;
}

void on_deadline(self_ptr self, uint64_t id, uint64_t epoch) {
  auto& st = self->state;
  auto i = st.rooms.find(id);
  if (i == st.rooms.end() || !i->second.fsm().is_current(epoch))
    return;
  auto& room = i->second;
  auto decider = decider_of(self, room);
  if (room.fsm().awaiting_verdict()) {
    verdict_overdue(
        self, room, decider,
        [&](const failure& why) {
          self->send(decider, room_failure{room.key(), why});
          sync(self, room);
        },
        [&](const failure& why) { settle(self, room, kv_poll::failed, why); });
    return;
  }
  if (!decider) {
    // No decode rank ever asked for the room: every rank of this instance
    // concludes alone, and all of them say the same.
    settle(self, room, kv_poll::failed,
           failure{
               errc::deadline, room.fsm().stuck_cause(room.key()) + ": no decode rank asked for it",
               instance_ref(role::prefill, st.cfg.self.instance, st.cfg.self.instance_generation)});
    return;
  }
  report(self, room, failure{errc::deadline, room.fsm().stuck_cause(room.key()), st.cfg.self});
}

/// The scheduler opened room `id`. The tombstones of the id stay: late
/// messages of the cleared room must not bind or conclude this one.
void open_room(self_ptr self, uint64_t id, room_slot_ptr slot) {
  auto& st = self->state;
  if (refuse_reopen(st.rooms, id, slot, st.cfg.self))
    return;
  auto& room =
      st.rooms.try_emplace(id, id, std::move(slot), st.cfg.self, st.cfg.layout, st.cfg.limits)
          .first->second;
  if (auto entry = st.early.take(id))
    open_waited(self, room, std::move(*entry));
  else
    sync(self, room);
}

/// The scheduler's init: how many pages the room has, and its aux row.
caf::result<void> init_room(self_ptr self, const sender_init& msg) {
  auto i = self->state.rooms.find(msg.room);
  if (i == self->state.rooms.end())
    return unknown_room(self->state.cfg.self, msg.room);
  if (auto bad = i->second.init(msg.num_pages, msg.aux_slot))
    report(self, i->second, std::move(*bad));
  else
    dispatch(self, i->second);
  return caf::unit;
}

/// The scheduler hands over pages of the room (the last ones: `last`).
caf::result<void> send_chunk(self_ptr self, chunk_send& msg) {
  auto i = self->state.rooms.find(msg.room);
  if (i == self->state.rooms.end())
    return unknown_room(self->state.cfg.self, msg.room);
  if (auto bad = i->second.accept(std::move(msg.pages), msg.last, std::move(msg.states)))
    report(self, i->second, std::move(*bad));
  else
    dispatch(self, i->second);
  return caf::unit;
}

/// The scheduler is done with room `id`: its outcome stays as a tombstone
/// for messages that come late.
caf::result<void> clear_room(self_ptr self, uint64_t id) {
  auto& st = self->state;
  auto* cleared = room_to_clear(self, id, "the prefill scheduler", report);
  if (!cleared)
    return unknown_room(st.cfg.self, id);
  auto& room = *cleared;
  st.early.bury(id, cleared_outcome(room.key(), room.fsm().state(), room.fsm().why(), st.cfg.self));
  st.room_deadlines.disarm(id);
  st.rooms.erase(id);
  st.deciders.erase(id);
  st.finish_told.erase(id);
  return caf::unit;
}

/// The transfer actor wrote a chunk (or could not: `why`): its decode rank
/// hears it landed.
void on_written(self_ptr self, chunk_result& r) {
  auto& st = self->state;
  auto i = st.rooms.find(r.key.room);
  if (i == st.rooms.end() || i->second.key().generation != r.key.generation)
    return;  // the room was cleared meanwhile
  auto& room = i->second;
  bool dest_done = room.landed(r.peer);
  if (r.why) {
    report(self, room, std::move(r.why));
    sync(self, room);  // a concluded room may release its pages now
    return;
  }
  note(self, room.key(),
       "chunk " + std::to_string(r.chunk) + " written to " + to_string(r.peer) + " (" +
           std::to_string(r.pages) + " pages, " + std::to_string(r.bytes) + " bytes)");
  if (auto p = st.peers.find(r.peer); p != st.peers.end())
    self->send(p->second.handle,
               chunk_landed{r.key, st.cfg.self, r.chunk, r.pages, r.bytes, dest_done, r.staged,
                            r.first_page, std::move(r.digests)});
  room.fsm().touch();
  if (room.done())
    finish(self, room);
  sync(self, room);
}

}  // namespace

failure on_exception(self_ptr self, const std::string& what) {
  return fail_live_rooms(self, what,
                         [](self_ptr s, auto& room, const failure& why) { report(s, room, why); });
}

}  // namespace prefill_steps

namespace {

/// The rank's start: its down handler, its link to the transfer actor (which
/// lives and dies with it: no orphan keeps writing), and its registration
/// with the bootstrap unless it is published first.
void start_prefill_rank(prefill_rank_actor::stateful_pointer<prefill_rank_state> self,
                        prefill_rank_config cfg) {
  using namespace prefill_steps;
  self->state.cfg = std::move(cfg);
  self->set_down_handler(
      guard(self, on_exception, [self](caf::down_msg& dm) { on_down(self, dm); }));
  self->link_to(self->state.cfg.transfer);
  if ((!self->state.cfg.bootstrap.host.empty() || self->state.cfg.bootstrap.handle) &&
      !self->state.cfg.publish_first)
    register_with_bootstrap(self);
}

}  // namespace

prefill_rank_actor::behavior_type prefill_rank(
    prefill_rank_actor::stateful_pointer<prefill_rank_state> self, prefill_rank_config cfg) {
  using namespace prefill_steps;
  start_prefill_rank(self, std::move(cfg));
  return guarded<prefill_rank_actor::behavior_type>(
      self, on_exception,
      // -- scheduler ------------------------------------------------------------
      [self](room_open_atom, uint64_t id, room_slot_ptr slot) {
        from_scheduler(self, "room_open", [&] { open_room(self, id, std::move(slot)); });
      },
      [self](sender_init& msg) -> caf::result<void> {
        return from_scheduler(self, "sender_init", [&] { return init_room(self, msg); });
      },
      [self](chunk_send& msg) -> caf::result<void> {
        return from_scheduler(self, "chunk_send", [&] { return send_chunk(self, msg); });
      },
      [self](room_abort_atom, uint64_t id) -> caf::result<void> {
        return from_scheduler(self, "room_abort", [&] {
          return abort_room(self, id, "the prefill scheduler", report);
        });
      },
      [self](room_clear_atom, uint64_t id) -> caf::result<void> {
        return from_scheduler(self, "room_clear", [&] { return clear_room(self, id); });
      },
      [self](room_poll_atom, uint64_t id) -> caf::result<room_status> {
        return from_scheduler(self, "room_poll", [&] { return poll_room(self, id); });
      },
      // -- decode ranks, deciders and the bootstrap -----------------------------
      [self](dest_registration& reg) -> caf::result<dest_accepted> {
        return accept_decode(self, reg);
      },
      [self](room_request& req) { on_request(self, req); },
      [self](control_endpoint& at) { on_control_endpoint(self, at); },
      [self](topology& topo) { on_instance_topology(self, topo); },
      [self](sibling_concluded& c) { on_sibling_concluded(self, c); },
      [self](room_verdict& v) { on_verdict(self, v); },
      [self](heartbeat_atom, uint64_t seq) -> caf::result<heartbeat_atom, uint64_t> {
        answer_ping(self, [self](const prefill_room& room) { return decider_of(self, room); });
        return {heartbeat_atom_v, seq};
      },
      // -- kvferry-ctl trace ----------------------------------------------------
      [self](trace_atom, uint64_t room) -> caf::result<room_trace> {
        return self->state.events.of_room(room, to_string(self->state.cfg.self));
      },
      // -- transfer actor -------------------------------------------------------
      [self](chunk_result& r) { on_written(self, r); },
      // -- timers ---------------------------------------------------------------
      [self](deadline_atom) { deadlines_due(self, on_deadline); },
      [self](expire_atom) { expiries_due(self); },
      [self](register_atom) { register_with_bootstrap(self); },
      [self](heartbeat_tick_atom) {
        check_beat(
            self, [self](const prefill_room& room) { return decider_of(self, room); },
            [self](prefill_room& room, const failure& why) {
              settle(self, room, kv_poll::failed, why);
            });
      });
}

}  // namespace kvferry
