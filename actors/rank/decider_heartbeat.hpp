// The ranks' side of the heartbeat: a rank answers its deciders' pings, and
// while it has live rooms it checks every heartbeat interval that their
// deciders are still heard from. A decider silent for longer than
// deadlines::decider_silence() (frozen, partitioned away) fails the rooms it
// decides here, with a cause every rank words the same.
//
// A check that runs late by more than a heartbeat means the rank itself was
// stalled: its deciders get a fresh grace period (and their verdicts, queued
// meanwhile, come next), rather than the blame.
//
// `Self` is a rank actor whose state has `cfg.limits`, `heard` (a
// silence_watch by decider address), `beat_armed` and `beat_due`.
#pragma once

#include <set>
#include <string>

#include <caf/actor_addr.hpp>
#include <caf/actor_cast.hpp>

#include "actors/log.hpp"
#include "actors/rank/room_fsm.hpp"
#include "messages/failure.hpp"
#include "messages/handles.hpp"

namespace kvferry {

/// The name a rank gives the decider of decode instance `instance`.
inline std::string decider_name(const std::string& instance, uint64_t generation) {
  return instance + " (generation " + std::to_string(generation) + ")";
}

/// The failure a rank concludes with when the decider named `name` went silent.
inline failure decider_silent(const std::string& name, std::chrono::nanoseconds limit) {
  return failure{errc::heartbeat_lost,
                 "the decider of " + name + " sent no heartbeat for " + format_duration(limit),
                 rank_ref{}};
}

/// Schedules the next check unless one is.
template <class Self>
void arm_decider_check(Self* self) {
  auto& st = self->state;
  if (st.beat_armed)
    return;
  st.beat_armed = true;
  st.beat_due = self->clock().now() + st.cfg.limits.heartbeat;
  self->delayed_send(self, st.cfg.limits.heartbeat, beat_atom_v);
}

/// Starts (or restarts) watching `decider`, the decider of a room that just
/// went live on this rank.
template <class Self, class Handle>
void watch_decider(Self* self, const Handle& decider, std::string name) {
  self->state.heard.watch(decider.address(), std::move(name), self->clock().now());
  arm_decider_check(self);
}

/// Something came from the current sender: if it is a watched decider, it is
/// alive.
template <class Self>
void heard_from_sender(Self* self) {
  self->state.heard.heard(caf::actor_cast<caf::actor_addr>(self->current_sender()),
                          self->clock().now());
}

/// The periodic check. `decider_of(room)` is the address of the decider of
/// a live room (null when it has none yet); `settle(room, why)` concludes a
/// room alone.
template <class Self, class Rooms, class DeciderOf, class Settle>
void check_deciders(Self* self, Rooms& rooms, DeciderOf decider_of, Settle settle) {
  auto& st = self->state;
  st.beat_armed = false;
  auto live = [&] {
    std::set<caf::actor_addr> out;
    for (auto& [id, room] : rooms)
      if (!room.fsm().terminal())
        if (auto a = decider_of(room))
          out.insert(a);
    return out;
  };
  st.heard.retain(live());
  auto now = self->clock().now();
  if (now - st.beat_due > st.cfg.limits.heartbeat) {
    log().warn("[{}] stalled for {}: its deciders get a fresh grace period", to_string(st.cfg.self),
               format_duration(now - st.beat_due));
    st.heard.refresh(now);
  }
  auto limit = st.cfg.limits.decider_silence();
  for (auto& gone : st.heard.silent(now, limit)) {
    auto why = decider_silent(st.heard.name(gone), limit);
    log().warn("[{}] {}", to_string(st.cfg.self), why.cause);
    for (auto& [id, room] : rooms)
      if (!room.fsm().terminal() && decider_of(room) == gone)
        settle(room, why);
  }
  st.heard.retain(live());
  if (st.heard.size() > 0)
    arm_decider_check(self);
}

}  // namespace kvferry
