// The decode rank's prefill instances going away: refusals, failed lookups
// and their backoff, an instance marked down (new rooms fail at once) and
// probed until it is whole again, a source lost by a down_msg, its bootstrap's
// rank_left or a verdict, and the decider going down. The record of each
// instance is a prefill_peer (plain logic); the handshakes are
// decode_handshake.cpp's.
#include <algorithm>
#include <chrono>

#include <caf/actor_cast.hpp>

#include "actors/base/log.hpp"
#include "actors/gateway/remote_lookup.hpp"
#include "actors/rank/decider_side.hpp"
#include "actors/rank/decode_rank_steps.hpp"
#include "actors/rank/rank_guard.hpp"

namespace kvferry::decode_steps {

namespace {

/// Schedules the next look at a peer that is down (backoff up to a second):
/// it stays down, and new rooms fail at once, until a probe finds it whole.
void arm_probe(self_ptr self, prefill_peer& peer, const std::string& key) {
  if (peer.arm_probe())
    self->delayed_send(self, peer.backoff(), retry_atom_v, key);
}

/// A verdict says a prefill rank was lost (the decider saw it go down, or it
/// stopped answering) even where this rank saw nothing (a route through
/// another node, a silent partition): the instance is looked up again for the
/// next rooms, as after a down_msg, and its live rooms here fail the same way.
void forget_lost_source(self_ptr self, const failure& why) {
  if (why.origin.side != role::prefill ||
      (why.code != errc::peer_down && why.code != errc::heartbeat_lost))
    return;
  auto& st = self->state;
  for (auto p = st.peers.begin(); p != st.peers.end(); ++p)
    if (p->second.serves(why.origin)) {
      mark_down(self, p->first, why, why);
      return;
    }
}

/// A verdict says contact was lost across instances (decider_lost: a rank
/// lost by its link, which this rank may not have seen: a source reached
/// through its bootstrap's node, whose bootstrap died too). The room's prefill
/// instance is looked up again at once: its handles here may be of a dead
/// incarnation. If the lookup fails, it is down (resolve_failed), as a
/// down_msg would have said: which of the two this rank hears first must not
/// decide whether its next rooms fail at once or wait out their deadline.
void forget_cut_off_source(self_ptr self, const decode_room& room, const failure& why) {
  auto& st = self->state;
  if (why != decider_lost(decider_ref(st.cfg.self.instance)))
    return;
  auto p = st.peers.find(room.peer());
  if (p == st.peers.end() || p->second.in_flight || !room.has_sources())
    return;
  // Only the incarnation the room was bound to: a lookup made since may have
  // found the next one already.
  auto bound = room.sources().front().rank;
  if (!p->second.same_sources(bound))
    return;
  auto key = p->first;
  log().info("{} {}: contact with the prefill instance at {} may be lost: it is looked up again",
             who(self), to_string(room.key()), key);
  for_rooms_of(self, key, [&](decode_room& r) { report(self, r, why); });
  for (auto& handle : p->second.lose_contact(bound))
    self->demonitor(handle.address());
  start_resolve(self, key);
}

}  // namespace

void refuse(self_ptr self, const std::string& key, failure why) {
  self->state.peers.at(key).refuse(why);
  log().error("{} prefill instance at {} refused: {}", who(self), key, to_string(why));
  for_rooms_of(self, key, [&](decode_room& room) {
    join(self, room);  // the decider tells the prefill side too
    report(self, room, why);
  });
}

void resolve_failed(self_ptr self, const std::string& key, std::string error) {
  auto p = self->state.peers.find(key);
  if (p == self->state.peers.end())
    return;
  auto& peer = p->second;
  bool waiting = false;
  for_rooms_of(self, key, [&](decode_room&) { waiting = true; });
  switch (peer.fail(std::move(error), waiting)) {
    case prefill_peer::retry::probe:
      log().debug("{} prefill instance at {} still down (probe {}): {}", who(self), key,
                  peer.attempts, peer.last_error);
      arm_probe(self, peer, key);
      return;
    case prefill_peer::retry::again:
      log().debug("{} prefill instance at {} not ready (attempt {}): {}", who(self), key,
                  peer.attempts, peer.last_error);
      self->delayed_send(self, peer.backoff(), retry_atom_v, key);
      return;
    case prefill_peer::retry::idle:
      log().debug("{} prefill instance at {} not ready (attempt {}): {}", who(self), key,
                  peer.attempts, peer.last_error);
      return;  // the next room restarts the resolve
    case prefill_peer::retry::down: {
      // Contact was lost, and it cannot be reached: its rank is taken for
      // gone, in the words a down_msg of it gives.
      auto gone = *peer.contact_lost;
      failure cause{errc::peer_down,
                    "prefill " + to_string(gone) + " went down (contact was lost, and " + key +
                        " cannot be reached: " + peer.last_error + ")",
                    gone};
      mark_down(self, key, cause, cause);
      return;
    }
  }
}

/// The prefill instance at `key` cannot serve rooms now: its live rooms here
/// fail with `why`, new ones fail at once with `cause` until a probe finds it
/// whole again. `survivors` are its ranks still there (the room's prefill
/// side for the decider); none keeps the ones known.
void mark_down(self_ptr self, const std::string& key, const failure& why, failure cause,
               std::optional<std::vector<participant>> survivors, spdlog::level::level_enum level) {
  auto& st = self->state;
  auto p = st.peers.find(key);
  if (p == st.peers.end())
    return;
  auto& peer = p->second;
  auto change = peer.go_down(std::move(cause), std::move(survivors));
  if (st.cfg.board)
    st.cfg.board->set_down(key, peer.down_cause);
  if (change.fresh) {
    log().log(level, "{} prefill instance {} at {} is down: new rooms to it fail at once ({})",
              who(self), peer.instance.empty() ? key : peer.instance, key,
              to_string(peer.down_cause));
    for (auto& handle : change.dropped)
      self->demonitor(handle.address());
  }
  // Live rooms: those bound to it fail with what happened to them; those
  // still waiting for it fail with the peer's cause.
  for_rooms_of(self, key, [&](decode_room& room) {
    if (room.fsm().awaiting_verdict() && !change.fresh)
      return;  // reported already
    if (room.requested() || room.fsm().awaiting_verdict())
      report(self, room, why);
    else
      fail_fast(self, room, peer);
  });
  arm_probe(self, peer, key);
}

void fail_fast(self_ptr self, decode_room& room, const prefill_peer& peer) {
  if (auto& figures = self->state.cfg.figures)
    figures->fast_failed(peer.down_cause.code);
  join(self, room);
  report(self, room, peer.down_cause);
}

void lose_source(self_ptr self, const rank_ref& gone, const std::string& reason, bool link,
                 spdlog::level::level_enum level, const rank_left* departure) {
  // Its instance is down: the live rooms bound to it fail (lost by its link,
  // it may live on cut off and conclude on its own: the cause both sides of a
  // cut word alike), and new rooms fail at once until a probe finds the
  // instance whole (a departure: dead until the rank registers again).
  auto& st = self->state;
  log().log(level, "{} prefill {} went down: {}", who(self), to_string(gone), reason);
  failure went{errc::peer_down, "prefill " + to_string(gone) + " went down (" + reason + ")",
               st.cfg.self};
  auto why = link ? decider_lost(decider_ref(st.cfg.self.instance)) : went;
  auto cause = departure ? instance_dead(gone.instance, gone.instance_generation, *departure)
                         : failure{errc::peer_down, went.cause, gone};
  for (auto p = st.peers.begin(); p != st.peers.end(); ++p)
    if (p->second.serves(gone)) {
      std::vector<participant> survivors;
      for (auto& r : p->second.everyone)
        if (!same_place(r.rank, gone))
          survivors.push_back(r);
      mark_down(self, p->first, why, cause, std::move(survivors), level);
      return;
    }
}

void on_down(self_ptr self, const caf::down_msg& dm) {
  auto& st = self->state;
  auto level =
      dm.reason == caf::exit_reason::user_shutdown ? spdlog::level::info : spdlog::level::warn;
  if (st.decider && st.decider.address() == dm.source) {
    log().log(level, "{} the decider went down: {}", who(self), caf::to_string(dm.reason));
    st.registered = false;
    auto why = decider_lost(decider_ref(st.cfg.self.instance));
    for (auto& [id, room] : st.rooms)
      if (!room.fsm().terminal())
        settle(self, room, kv_poll::failed, why);
    self->delayed_send(self, register_retry, register_atom_v);
    return;
  }
  for (auto& [key, peer] : st.peers)
    for (auto& [rank, handle] : peer.handles)
      if (handle.address() == dm.source) {
        lose_source(self, rank, caf::to_string(dm.reason), link_lost(dm.reason), level);
        return;
      }
}

void forget_after_verdict(self_ptr self, const decode_room& room, const failure& why) {
  forget_lost_source(self, why);
  forget_cut_off_source(self, room, why);
}

}  // namespace kvferry::decode_steps
