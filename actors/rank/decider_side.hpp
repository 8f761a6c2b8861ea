// The side of a rank that faces its rooms' deciders, one copy for both rank
// actors: telling a decider the rank finished, answering its pings, waiting
// for an overdue verdict, and the heartbeat: a rank answers its deciders' pings, and
// while it has live rooms it checks every heartbeat interval that their
// deciders are still heard from. A decider silent for longer than
// deadlines::decider_silence() (frozen, partitioned away) fails the rooms it
// decides here, with the cause every rank uses for a lost decider.
//
// A check that runs late by more than a heartbeat means the rank itself was
// stalled: its deciders get a fresh grace period (and their verdicts, queued
// meanwhile, come next), rather than the blame.
//
// `Self` is a rank actor whose state has `cfg.self`, `cfg.limits`, `rooms`
// (room id → room), `finish_told`, `deciders_heard` (a silence_watch by decider
// address), `tick_armed` and `tick_due`. `decider_of(room)` is the handle of
// a room's decider (null while it has none).
#pragma once

#include <map>
#include <set>
#include <string>

#include <caf/actor_addr.hpp>
#include <caf/actor_cast.hpp>

#include "actors/base/log.hpp"
#include "actors/common/decider_lost.hpp"
#include "actors/common/durations.hpp"
#include "actors/rank/overdue_action.hpp"
#include "actors/rank/rank_guard.hpp"
#include "actors/rank/room_fsm.hpp"
#include "messages/decision.hpp"
#include "messages/failure.hpp"
#include "messages/handles.hpp"
#include "messages/room.hpp"

namespace kvferry {

/// Schedules the next check unless one is.
template <class Self>
void arm_decider_check(Self* self) {
  auto& st = self->state;
  if (st.tick_armed)
    return;
  st.tick_armed = true;
  st.tick_due = self->clock().now() + st.cfg.limits.heartbeat;
  // Urgent: the check of a decider's silence does not wait behind a backlog
  // of room traffic (nor do its pings, which are urgent too).
  self->template delayed_send<caf::message_priority::high>(self, st.cfg.limits.heartbeat,
                                                           heartbeat_tick_atom_v);
}

/// Starts (or restarts) watching `decider`, the decider of a room that just
/// went live on this rank.
template <class Self, class Handle>
void watch_decider(Self* self, const Handle& decider, rank_ref who) {
  self->state.deciders_heard.watch(decider.address(), std::move(who), self->clock().now());
  arm_decider_check(self);
}

/// True when the decider at `addr` was heard from recently enough to be alive.
template <class Self>
bool decider_alive(Self* self, const caf::actor_addr& addr) {
  auto& st = self->state;
  return st.deciders_heard.heard_within(addr, self->clock().now(), st.cfg.limits.decider_silence());
}

/// Something came from the current sender: if it is a watched decider, it is
/// alive.
template <class Self>
void heard_from_sender(Self* self) {
  self->state.deciders_heard.heard(caf::actor_cast<caf::actor_addr>(self->current_sender()),
                                   self->clock().now());
}

/// A ping from a decider: the rooms this rank finished that still wait for
/// that decider's verdict tell it again that they finished, at most once per
/// heartbeat silence (the decider answers a decided room with its verdict).
/// A finish or verdict lost on a route that was being set up then costs a
/// second, not the room's whole deadline. `told` maps a room id to when its
/// finish was last sent; `decider_of(room)` is the address of a live room's
/// decider; `remind(room)` sends room_finished again.
template <class Self, class Rooms, class DeciderOf, class Remind>
void remind_finished(Self* self, Rooms& rooms,
                     std::map<uint64_t, caf::actor_clock::time_point>& told, DeciderOf decider_of,
                     Remind remind) {
  auto now = self->clock().now();
  auto sender = caf::actor_cast<caf::actor_addr>(self->current_sender());
  auto every = self->state.cfg.limits.silence();
  for (auto i = told.begin(); i != told.end();) {
    auto r = rooms.find(i->first);
    if (r == rooms.end() || r->second.fsm().terminal() || !r->second.fsm().awaiting_verdict()) {
      i = told.erase(i);
      continue;
    }
    if (now - i->second >= every && decider_of(r->second) == sender) {
      remind(r->second);
      i->second = now;
    }
    ++i;
  }
}

/// The periodic check. `decider_of(room)` is the address of the decider of
/// a live room (null when it has none yet); `settle(room, why)` concludes a
/// room alone.
template <class Self, class Rooms, class DeciderOf, class Settle>
void check_deciders(Self* self, Rooms& rooms, DeciderOf decider_of, Settle settle) {
  auto& st = self->state;
  st.tick_armed = false;
  auto live = [&] {
    std::set<caf::actor_addr> out;
    for (auto& [id, room] : rooms)
      if (!room.fsm().terminal())
        if (auto a = decider_of(room))
          out.insert(a);
    return out;
  };
  st.deciders_heard.retain(live());
  auto now = self->clock().now();
  if (now - st.tick_due > st.cfg.limits.heartbeat) {
    log().warn("[{}] stalled for {}: its deciders get a fresh grace period", to_string(st.cfg.self),
               format_duration(now - st.tick_due));
    st.deciders_heard.refresh(now);
  }
  auto limit = st.cfg.limits.decider_silence();
  for (auto& gone : st.deciders_heard.silent(now, limit)) {
    auto why = decider_lost(st.deciders_heard.label_or(gone, unknown_decider()));
    log().warn("[{}] {}: silent for {}", to_string(st.cfg.self), why.cause, format_duration(limit));
    for (auto& [id, room] : rooms)
      if (!room.fsm().terminal() && decider_of(room) == gone)
        settle(room, why);
  }
  st.deciders_heard.retain(live());
  if (st.deciders_heard.size() > 0)
    arm_decider_check(self);
}

/// This rank's part of `room` is done: its decider hears it, and the room
/// waits for the verdict as long as a transfer may still take elsewhere.
template <class Self, class Room, class Decider>
void tell_finished(Self* self, Room& room, const Decider& decider) {
  auto& st = self->state;
  self->send(decider, room_finished{room.key(), st.cfg.self});
  st.finish_told[room.key().room] = self->clock().now();
  room.fsm().await_verdict(st.cfg.limits.transferring + st.cfg.limits.verdict, true);
}

/// A decider's ping: it is alive, and hears again of the rooms this rank
/// finished that still wait for its verdict (remind_finished).
template <class Self, class DeciderOf>
void answer_ping(Self* self, DeciderOf decider_of) {
  heard_from_sender(self);
  auto& st = self->state;
  remind_finished(
      self, st.rooms, st.finish_told, [&](const auto& room) { return decider_of(room).address(); },
      [&](const auto& room) {
        self->send(decider_of(room), room_finished{room.key(), st.cfg.self});
      });
}

/// The periodic check (check_deciders): a room whose decider fell silent
/// concludes here with `settle(room, why)`, and the decider hears why first
/// if it was only cut off and comes back.
template <class Self, class DeciderOf, class Settle>
void check_beat(Self* self, DeciderOf decider_of, Settle settle) {
  check_deciders(
      self, self->state.rooms, [&](const auto& room) { return decider_of(room).address(); },
      [&](auto& room, const failure& why) {
        settle(room, why);
        if (auto d = decider_of(room))
          self->send(d, room_failure{room.key(), why});
      });
}

/// A room that waits for its verdict ran past its deadline. Its cause: the
/// one this rank reported, or, having finished, the wait itself. A decider
/// still heard from is late, not gone: it hears why (`remind(why)`) and
/// decides for everyone, a few times. A silent one is left to the silence
/// check (check_deciders), which concludes with the words every rank uses
/// for it within a heartbeat: that check is urgent, as the verdicts are, so
/// a verdict the decider sent before its lease ran out is read first (a
/// deadline is not urgent, and could overtake it). Without a decider,
/// `settle(why)` concludes the room alone. `publish()` puts the room's new
/// deadline (wait_longer) in the book: the fired one is gone from it, and a
/// decider heard again before the check finds it silent would otherwise
/// leave the room waiting for a verdict with no deadline at all.
template <class Self, class Room, class Decider, class Remind, class Settle, class Publish>
void verdict_overdue(Self* self, Room& room, const Decider& decider, Remind remind, Settle settle,
                     Publish publish) {
  auto& st = self->state;
  auto& fsm = room.fsm();
  log().warn("{} {}", who(self), fsm.stuck_cause(room.key()));
  // A deadline, not a peer's death: nobody is named down for a late verdict
  // (a verdict that named a prefill rank down would make the decode ranks
  // take its whole instance for dead).
  auto why = room.reported() ? room.reported()
                             : failure{errc::deadline, fsm.stuck_cause(room.key()), st.cfg.self};
  bool alive = decider && decider_alive(self, decider.address());
  switch (overdue_action_for(static_cast<bool>(decider), alive, decider ? fsm.wait_longer() : 0)) {
    case overdue_action::remind:
      remind(why);
      return;
    case overdue_action::check_decider:
      arm_decider_check(self);
      publish();
      return;
    case overdue_action::settle:
      settle(why);
      return;
  }
}

}  // namespace kvferry
