// A prefill room's life, in the order it runs: opened by the scheduler,
// requested by decode ranks (now, before the open, after the clear: the
// backlog of early arrivals is plain logic, early_arrivals.hpp), initialized,
// its chunks planned and handed to the transfer actor, their results told to
// decode, finished, and concluded by the decider's verdict or its deadline.
// Peers (registrations, the bootstrap, losses) are prefill_peers.cpp's.
#include <algorithm>
#include <chrono>

#include <caf/actor_cast.hpp>

#include "actors/base/log.hpp"
#include "actors/common/deadline_timer.hpp"
#include "actors/plan/kv_digest.hpp"
#include "actors/plan/staging_plan.hpp"
#include "actors/plan/tp_mapping.hpp"
#include "actors/rank/decider_side.hpp"
#include "actors/rank/prefill_rank.hpp"
#include "actors/rank/prefill_rank_steps.hpp"
#include "actors/rank/rank_guard.hpp"
#include "actors/rank/request_outcome.hpp"
#include "actors/rank/room_steps.hpp"
#include "messages/scheduler.hpp"
#include "messages/transfer.hpp"

namespace kvferry::prefill_steps {

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

/// Room `id`'s decider is `decider`; a decider is monitored once, not per room.
void note_decider(self_ptr self, uint64_t id, const decider_actor& decider) {
  auto& st = self->state;
  st.deciders.insert_or_assign(id, decider);
  if (st.deciders_monitored.insert(decider.address()).second)
    self->monitor(decider);
}

/// A request for open room `room`: judged as a value (request_outcome.hpp),
/// then done.
void handle_request(self_ptr self, prefill_room& room, const room_request& req) {
  auto& st = self->state;
  request_facts facts{
      room.key(),       room.fsm().state(),
      room.fsm().why(), room.key().generation == 0 ? st.early.cleared_as(req.key) : nullptr,
      st.instance_down, st.peers.count(req.decode_rank) > 0,
      st.cfg.self};
  auto out = judge_request(facts, req);
  using action = request_outcome::action;
  if (out.what == action::ignore)
    return;
  if (out.what == action::tell_decider) {
    self->send(req.decider, room_failure{req.key, out.why});
    return;
  }
  if (!st.deciders.count(room.id())) {
    note_decider(self, room.id(), req.decider);
    watch_decider(self, req.decider, decider_ref(req.decode_rank.instance));
  }
  room.adopt(req.key.generation);
  if (out.what == action::report) {
    report(self, room, out.why);
    return;
  }
  auto peer = st.peers.find(req.decode_rank);
  auto& dl = peer->second.layout;
  auto& me = st.cfg.self;
  auto required = destinations_of({st.cfg.tp_size, st.cfg.pp_size}, {dl.tp_size, dl.pp_size}, me.tp,
                                  me.pp, st.cfg.layout.mla, st.cfg.layout.total_kv_heads);
  if (auto bad = room.bind(req, dl, required)) {
    report(self, room, std::move(*bad));
    return;
  }
  if (room.bound()) {
    room.fsm().advance(kv_poll::waiting_for_input);
    log().debug("{} {}: every destination known, WaitingForInput", who(self),
                to_string(room.key()));
  }
  dispatch(self, room);
}

/// Keeps a request for a room the scheduler has not opened (yet).
void keep_for_open(self_ptr self, const room_request& req) {
  auto& st = self->state;
  switch (st.early.keep_request(req)) {
    case early_arrivals::kept::full:
      self->send(req.decider,
                 room_failure{req.key, failure{errc::invalid_argument,
                                               std::to_string(st.early.max_waiting()) +
                                                   " requests already wait for rooms this rank "
                                                   "has not opened",
                                               st.cfg.self}});
      return;
    case early_arrivals::kept::crowded:
      self->send(req.decider,
                 room_failure{req.key, failure{errc::invalid_argument,
                                               std::to_string(st.early.max_requests_per_room()) +
                                                   " decode ranks' requests already wait for " +
                                                   to_string(req.key) + " on this rank",
                                               st.cfg.self}});
      return;
    case early_arrivals::kept::decided:
      return;
    case early_arrivals::kept::first:
      arm_expiry(self, req.key.room, req.key.generation);
      [[fallthrough]];
    case early_arrivals::kept::another:
      if (st.cfg.board)
        st.cfg.board->add_requested(req.key.room);
      return;
  }
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
        [&](const failure& why) { settle(self, room, kv_poll::failed, why); },
        [&] { sync(self, room); });
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

failure on_exception(self_ptr self, const std::string& what) {
  return fail_live_rooms(self, what,
                         [](self_ptr s, auto& room, const failure& why) { report(s, room, why); });
}

/// The room opened: the requests and verdict that came first take effect.
void open_waited(self_ptr self, prefill_room& room, early_arrivals::waiting entry) {
  auto& st = self->state;
  if (st.cfg.board)
    st.cfg.board->remove_requested(room.id());
  if (entry.verdict) {
    if (entry.request.decider)
      note_decider(self, room.id(), entry.request.decider);
    room.adopt(entry.verdict->key.generation);
    settle(self, room, entry.verdict->outcome, entry.verdict->why);
    return;
  }
  for (auto& req : entry.requests)
    handle_request(self, room, req);
}

/// The time of a room requested but not opened ran out.
void expire_waiting(self_ptr self, uint64_t id, uint64_t generation) {
  auto& st = self->state;
  auto gone = st.early.expire(id, generation, st.cfg.limits.bootstrapping, st.cfg.self);
  if (!gone)
    return;
  if (st.cfg.board)
    st.cfg.board->remove_requested(id);  // no longer offered to the scheduler
  if (!gone->failed)
    return;
  self->send(gone->request.decider, room_failure{gone->request.key, gone->verdict.why});
  // Kept a while, so that a late open concludes with the same cause.
  arm_expiry(self, id, generation);
}

void arm_expiry(self_ptr self, uint64_t id, uint64_t generation) {
  auto& st = self->state;
  set_timer(self,
            st.early.arm_expiry(id, generation, self->clock().now() + st.cfg.limits.bootstrapping),
            expire_atom_v);
}

void expiries_due(self_ptr self) {
  auto fired = self->state.early.expiries_due(self->clock().now());
  set_timer(self, fired.set_timer, expire_atom_v);
  for (auto& d : fired.due_now)
    expire_waiting(self, d.room, d.tag);
}

/// A decode rank asks for a room: handled now if open, answered from the
/// outcomes of cleared rooms, or kept for the open.
void on_request(self_ptr self, room_request& req) {
  auto& st = self->state;

  if (auto old = st.incarnations_seen.stale(req.decode_rank, st.cfg.self)) {
    self->send(req.decider, room_failure{req.key, std::move(*old)});
    return;
  }
  if (auto i = st.rooms.find(req.key.room); i != st.rooms.end()) {
    handle_request(self, i->second, req);
    return;
  }
  if (auto* v = st.early.cleared(req.key.room)) {
    if (v->outcome == kv_poll::failed)
      self->send(req.decider, room_failure{req.key, v->why});
    return;
  }
  keep_for_open(self, req);
}

/// Another rank of this instance concluded a room that lost its decider.
void on_sibling_concluded(self_ptr self, sibling_concluded& c) {
  auto& st = self->state;
  auto from = self->current_sender();
  if (std::none_of(st.siblings.begin(), st.siblings.end(),
                   [&](auto& s) { return s.address() == from; })) {
    log().warn(
        "{} room {}: dropped a sibling's conclusion from {}, not a rank of this "
        "instance",
        who(self), c.room, caf::to_string(from));
    return;
  }
  auto i = st.rooms.find(c.room);
  if (i == st.rooms.end() || st.deciders.count(c.room))
    return;  // not here, or its own decider concludes it
  auto& room = i->second;
  if (room.fsm().terminal() || room.fsm().awaiting_verdict())
    return;
  log().info("{} {}: a rank of this instance lost its decider: {}", who(self),
             to_string(room.key()), to_string(c.why));
  settle(self, room, kv_poll::failed, c.why);
}

/// A decider's verdict, for a room open here, cleared, or not opened yet.
void on_verdict(self_ptr self, room_verdict& v) {
  auto& st = self->state;
  // Only from the room's decider. Before the room is bound to one, a
  // decider that refused or failed it may not be known here yet: a
  // Failed verdict is taken, but Success never (this rank had not
  // finished its part of a room it is not bound in).
  if (auto d = st.deciders.find(v.key.room); d != st.deciders.end()) {
    if (!from(self, d->second.address(), who(self), "a verdict"))
      return;
  } else if (v.outcome != kv_poll::failed) {
    drop_stranger(self, who(self), "a Success verdict for a room not bound to a decider");
    return;
  }
  heard_from_sender(self);
  if (auto i = st.rooms.find(v.key.room); i != st.rooms.end()) {
    auto& room = i->second;
    if (room.key().generation == 0 && st.early.cleared_as(v.key))
      return;  // the verdict of the cleared room with this id, sent again
    room.adopt(v.key.generation);
    if (room.key().generation == v.key.generation) {
      note(self, v.key, "verdict " + to_string(v.outcome) + " from the decider",
           v.outcome == kv_poll::failed ? to_string(v.why) : std::string{});
      settle(self, room, v.outcome, v.why);
    }
    return;
  }
  // A verdict for a room this rank already cleared changes nothing.
  if (st.early.cleared(v.key.room))
    return;
  // The decider decided before the scheduler opened the room here.
  // Its wait runs out when the first request's would (if one waits already).
  if (st.early.keep_verdict(v, caf::actor_cast<decider_actor>(self->current_sender())) &&
      !st.early.expiry_armed(v.key.room))
    arm_expiry(self, v.key.room, v.key.generation);
}

}  // namespace kvferry::prefill_steps
