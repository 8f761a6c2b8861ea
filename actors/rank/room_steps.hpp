// The steps both rank actors take with a room, whatever its side: mirror its
// state into the slot the scheduler polls and arm its deadline, conclude it,
// answer a poll, abort it, refuse a room that is not open.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>

#include <caf/make_message.hpp>
#include <caf/result.hpp>

#include "actors/base/log.hpp"
#include "actors/common/deadline_timer.hpp"
#include "actors/common/event_ring.hpp"
#include "actors/metrics/rank_figures.hpp"
#include "actors/rank/room_fsm.hpp"
#include "messages/failure.hpp"
#include "messages/handles.hpp"
#include "messages/poll_snapshot.hpp"
#include "messages/scheduler.hpp"

namespace kvferry {

/// Arms room `room`'s deadline (epoch `epoch`, `after` from now) in the
/// rank's book (`Self`'s state has `room_deadlines`); the rank's one timer,
/// a deadline_atom to `self`, is set again if it must go off earlier.
template <class Self>
void arm_deadline(Self* self, uint64_t room, uint64_t epoch, std::chrono::nanoseconds after) {
  set_timer(self, self->state.room_deadlines.arm(room, epoch, self->clock().now() + after),
            deadline_atom_v);
}

/// Records `what` (and `cause`) of room `key` in the rank's event ring
/// (`Self`'s state has `events`), for kvferry-ctl trace.
template <class Self>
void note(Self* self, const room_key& key, std::string what, std::string cause = {}) {
  self->state.events.add(key.room, key.generation, std::move(what), std::move(cause));
}

/// Mirrors `fsm` into `slot` (when there is one), the rank's figures and its
/// event ring, and keeps the room's deadline in the rank's book: the one
/// `fsm` armed, none once it concluded.
template <class Self>
void publish(Self* self, const room_slot_ptr& slot, const room_key& key, room_fsm& fsm) {
  if (auto c = fsm.take_change()) {
    if (auto& figures = self->state.cfg.figures)
      figures->moved(c->from, c->to, fsm.why(), std::chrono::steady_clock::now() - fsm.opened_at());
    note(self, key, c->from ? to_string(c->to) : "opened (" + to_string(c->to) + ")",
         c->to == kv_poll::failed ? to_string(fsm.why()) : std::string{});
  }
  if (slot) {
    if (fsm.state() == kv_poll::failed)
      slot->fail(key, fsm.why());
    else
      slot->advance(fsm.state());
  }
  if (auto t = fsm.take_timer())
    arm_deadline(self, key.room, t->epoch, t->after);
  if (fsm.terminal())
    self->state.room_deadlines.disarm(key.room);
}

/// The rank's deadline timer went off: `on_deadline(self, room, epoch)` for
/// each deadline due, earliest first, and the timer is set for the next one.
/// A live room armed again since its due deadline (progress its rank has not
/// published yet) gets its newer deadline in the book instead: no live room
/// is ever left without one.
template <class Self, class OnDeadline>
void deadlines_due(Self* self, OnDeadline on_deadline) {
  auto fired = self->state.room_deadlines.fire(self->clock().now());
  set_timer(self, fired.set_timer, deadline_atom_v);
  for (auto& d : fired.due_now) {
    auto i = self->state.rooms.find(d.room);
    if (i == self->state.rooms.end() || i->second.fsm().terminal())
      continue;
    auto& room = i->second;
    if (room.fsm().is_current(d.tag))
      on_deadline(self, d.room, d.tag);
    else
      publish(self, room.slot(), room.key(), room.fsm());
  }
}

/// Concludes a room (`Room` has key(), fsm() and slot()) and publishes it.
template <class Self, class Room>
void conclude(Self* self, const rank_ref& me, Room& room, kv_poll outcome, const failure& why) {
  auto& fsm = room.fsm();
  bool changed = outcome == kv_poll::success ? fsm.succeed() : fsm.fail(why);
  if (changed && outcome == kv_poll::success)
    log().debug("[{}] {}: Success", to_string(me), to_string(room.key()));
  else if (changed)
    log().info("[{}] {}: Failed: {}", to_string(me), to_string(room.key()), to_string(why));
  publish(self, room.slot(), room.key(), fsm);
}

/// The answer to a poll by message.
template <class Room>
room_status status_of(const Room& room) {
  return room_status{room.key(), room.fsm().state(), room.fsm().why(), room.prefix_tokens()};
}

/// Refuses opening room `id` again while it is open on `me`: its slot reads
/// Failed (duplicate_room) and the open room is untouched. True if refused.
template <class Rooms>
bool refuse_reopen(const Rooms& rooms, uint64_t id, const room_slot_ptr& slot, const rank_ref& me) {
  if (!rooms.count(id))
    return false;
  if (slot)
    slot->fail(room_key{id, 0},
               failure{errc::duplicate_room,
                       "room " + std::to_string(id) + " is already open on this rank", me});
  return true;
}

/// The error for a message about a room that is not open on `me`.
inline caf::error unknown_room(const rank_ref& me, uint64_t id) {
  return make_error(errc::unknown_room,
                    "room " + std::to_string(id) + " is not open on " + to_string(me));
}

/// The answer to the scheduler's poll of room `id` (`Self`'s state has
/// `cfg.self` and `rooms`).
template <class Self>
caf::result<room_status> poll_room(Self* self, uint64_t id) {
  auto i = self->state.rooms.find(id);
  if (i == self->state.rooms.end())
    return unknown_room(self->state.cfg.self, id);
  return status_of(i->second);
}

/// The scheduler (`by`: "the prefill scheduler") aborts room `id`: it fails
/// with errc::aborted through `report(self, room, why)`, the rank's way of
/// failing a room (its decider decides for every rank).
template <class Self, class Report>
caf::result<void> abort_room(Self* self, uint64_t id, const char* by, Report report) {
  auto i = self->state.rooms.find(id);
  if (i == self->state.rooms.end())
    return unknown_room(self->state.cfg.self, id);
  report(self, i->second,
         failure{errc::aborted, std::string{"aborted by "} + by, self->state.cfg.self});
  return caf::unit;
}

/// The scheduler (`by`: "the prefill scheduler") clears room `id`: a room
/// that has not concluded fails first (aborted) through `report(self, room,
/// why)`. The room, for the rank's own clearing; nullptr if it has none.
template <class Self, class Report>
auto* room_to_clear(Self* self, uint64_t id, const char* by, Report report) {
  auto& st = self->state;
  auto i = st.rooms.find(id);
  decltype(&i->second) room = i == st.rooms.end() ? nullptr : &i->second;
  if (room && !room->fsm().terminal())
    report(self, *room,
           failure{errc::aborted,
                   std::string{"cleared by "} + by + " in " + to_string(room->fsm().state()),
                   st.cfg.self});
  return room;
}

}  // namespace kvferry
