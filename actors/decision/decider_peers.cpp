// The decider's peers: whom it hears from and whom it has lost. Heartbeat
// rounds ping every member and every prefill participant of an undecided room;
// leases say when a participant may have declared this decider lost; a member
// or prefill rank that goes down fails its rooms; reach_peers connects this
// process to the prefill ranks' processes.
#include <chrono>
#include <optional>
#include <set>
#include <vector>

#include <caf/actor_cast.hpp>

#include "actors/base/log.hpp"
#include "actors/common/decider_lost.hpp"
#include "actors/common/durations.hpp"
#include "actors/decision/decider_steps.hpp"
#include "actors/gateway/remote_lookup.hpp"
#include "messages/wall_clock.hpp"

namespace kvferry::decider_steps {

namespace {

/// How long the decider waits for a connection to a prefill rank's process:
/// a loaded machine can take longer than a heartbeat silence to accept, and
/// the asking decode rank waits 5 s for the answer.
constexpr auto reach_timeout = std::chrono::seconds{4};

/// Fails every undecided room `gone` takes part in (every room, for a decode
/// member: each one is a participant of all of them).
void fail_rooms_of(self_ptr self, const rank_ref& gone, const failure& why) {
  auto& book = self->state.book;
  for (auto& key : book.undecided())
    if (auto* r = book.find(key); r && (gone.side == role::decode || r->prefill.count(gone)))
      if (!lapsed(self, *r))
        if (auto v = book.fail(*r, why))
          broadcast(self, *r, *v);
}

/// A round without an answer from `peer` (`over`: its ping failed or was
/// given up; else it is still out); enough in a row and it is lost.
void missed(self_ptr self, const rank_ref& peer, bool over) {
  auto& st = self->state;
  // Silent for the whole silence by the clock (a SIGSTOP is seen within the
  // silence, not a round after it): since the last ping it answered was
  // sent, or, never having answered, since it was first asked.
  auto a = st.answered_at.find(peer);
  auto f = st.first_asked.find(peer);
  auto since = a != st.answered_at.end()   ? std::optional{a->second}
               : f != st.first_asked.end() ? std::optional{f->second}
                                           : std::nullopt;
  // Only if this decider kept time all along (no stall of its own since).
  bool silent_long =
      since && self->clock().now() - *since >= st.limits.silence() && st.stall_end < *since;
  auto v = over ? st.beats.missed(peer, silent_long) : st.beats.late(peer, silent_long);
  if (st.figures) {
    st.figures->missed(peer);
    if (v == liveness<rank_ref>::standing::newly_lost)
      st.figures->standing(peer, false);
  }
  if (v == liveness<rank_ref>::standing::alive)
    return;
  auto cause = to_string(peer) + " answered none of " + std::to_string(st.beats.misses()) +
               " heartbeats in a row (" + format_duration(st.limits.silence()) + ")";
  failure why{errc::heartbeat_lost, cause, peer};
  if (v == liveness<rank_ref>::standing::newly_lost) {
    log().warn("{} {}: declared lost", who(self), cause);
    if (peer.side == role::decode)
      st.missing.went(peer,
                      "answered none of " + std::to_string(st.beats.misses()) +
                          " heartbeats in a row (" + format_duration(st.limits.silence()) + ")",
                      wall_ns());
    if (peer.side == role::prefill)
      if (auto h = st.prefill.find(peer); h != st.prefill.end())
        st.lost_prefill.insert_or_assign(
            peer, decider_state::lost_rank{h->second, why, self->clock().now()});
  }
  fail_rooms_of(self, peer, why);
}

}  // namespace

/// True (and the room failed with that cause) if a participant of undecided
/// room `r` may already have declared this decider lost: it has answered no
/// ping sent within the lease. The basis is always a moment the participant
/// heard this decider at or after: a member, the last ping it answered was
/// sent (members are pinged all the time, from their registration on, whose
/// answer starts the count; one never registered here, the room's opening);
/// a prefill participant, that or the room's opening here (it is asked for
/// the room only once a member was keyed).
/// Never the arrival of a join: a join that waited in this decider's mailbox
/// says the member was alive when it sent it, not that it heard this decider
/// since (a member behind a burst gave up on it meanwhile, and the verdict
/// must say so). So a decider that was frozen, cut off or starved knows it
/// when it comes back. Every verdict checks it first, so no rank concludes
/// otherwise than the one that gave up.
bool lapsed(self_ptr self, decision_book::room& r) {
  auto& st = self->state;
  if (r.decision.decided())
    return false;
  auto now = self->clock().now();
  for (auto& p : r.decision.participants()) {
    auto a = st.answered_at.find(p);
    auto basis = r.opened;
    if (a != st.answered_at.end() && (p.side == role::decode || a->second > basis))
      basis = a->second;
    if (now - basis < st.limits.decider_lease())
      continue;
    auto why = decider_lost(decider_ref(st.book.instance()));
    log().warn(
        "{} {}: {} has heard nothing from it for {}: failing with the cause it may have "
        "concluded with",
        who(self), to_string(r.key), to_string(p), format_duration(now - basis));
    if (auto v = st.book.fail(r, why))
      broadcast(self, r, *v);
    return true;
  }
  return false;
}

/// Schedules the next heartbeat round unless one is.
void arm_heartbeat(self_ptr self) {
  auto& st = self->state;
  if (st.beating)
    return;
  st.beating = true;
  // At a fixed rate while rounds follow each other (the next one an interval
  // after the last was due, not after it ran): a silence is judged on the
  // interval's grid, not a grid that drifts by each round's own delay.
  auto now = self->clock().now();
  auto due = st.tick_due + st.limits.heartbeat;
  if (due <= now)
    due = now + st.limits.heartbeat;
  st.tick_due = due;
  // Urgent, as the pings and their answers: liveness never waits behind a
  // backlog of room traffic (a burst of rooms is load, not death).
  self->template scheduled_send<caf::message_priority::high>(self, due, heartbeat_tick_atom_v);
}

namespace {

/// A ping sent at `sent` to rank `r` was answered: it is alive (taken again
/// by rooms, by the instance) and its lease counts from `sent`.
void heard_from(self_ptr self, const rank_ref& r, caf::actor_clock::time_point sent) {
  auto& st = self->state;
  if (st.lost_prefill.erase(r) > 0)
    log().info("{} {} answers again: rooms may name it again", who(self), to_string(r));
  if (st.figures)
    st.figures->standing(r, true);
  if (r.side == role::decode && st.missing.back(r))
    log().info("{} {} answers again: the instance takes rooms again", who(self), to_string(r));
  if (!st.beats.watching(r))
    return;  // no longer watched
  st.beats.answered(r);
  st.first_asked.erase(r);
  auto& at = st.answered_at[r];
  at = std::max(at, sent);
}

/// Pings rank `r` once this round (`watched` collects the round's ranks),
/// or counts a miss while its last ping is still out: its answer still
/// counts if it comes within the silence (a rank behind a long mailbox, a
/// burst of rooms, is slow, not lost).
template <class Handle>
void ping_rank(self_ptr self, const rank_ref& r, const Handle& handle,
               std::set<rank_ref>& watched) {
  auto& st = self->state;
  if (!watched.insert(r).second)
    return;  // once per round, however many rooms name it
  if (!st.beats.ping(r)) {
    missed(self, r, false);
    return;
  }
  auto sent = self->clock().now();
  if (!st.answered_at.count(r))
    st.first_asked.try_emplace(r, sent);
  // Urgent: the ping goes ahead of the rank's room traffic, and its answer
  // (a response keeps its request's priority) ahead of this decider's.
  self->template request<caf::message_priority::high>(handle, st.limits.silence(), heartbeat_atom_v,
                                                      ++st.pings)
      .then(guard(self, on_exception,
                  [self, r, sent](heartbeat_atom, uint64_t) { heard_from(self, r, sent); }),
            guard(self, on_exception, [self, r](caf::error&) { missed(self, r, true); }));
}

/// After a round: ranks no longer watched are forgotten, except that a rank
/// no room names keeps its last answer a while (if a room names it again
/// soon, its silence still counts from its last word).
void forget_unwatched(self_ptr self, const std::set<rank_ref>& watched,
                      caf::actor_clock::time_point now) {
  auto& st = self->state;
  st.beats.retain(watched);
  std::erase_if(st.answered_at, [&](auto& kv) {
    return !watched.count(kv.first) && now - kv.second > 2 * st.limits.silence();
  });
  std::erase_if(st.first_asked, [&](auto& kv) { return !watched.count(kv.first); });
  forget_unnamed_prefill(self);
}

}  // namespace

/// Pings every member (always: see lapsed()), and every prefill participant
/// of an undecided room.
void heartbeat_round(self_ptr self) {
  auto& st = self->state;
  st.beating = false;
  auto now = self->clock().now();
  if (now - st.tick_due > st.limits.heartbeat) {
    log().warn("{} stalled for {}", who(self), format_duration(now - st.tick_due));
    st.stall_end = now;
  }
  for (auto& key : st.book.undecided())
    if (auto* r = st.book.find(key))
      lapsed(self, *r);
  auto open = st.book.undecided();
  std::set<rank_ref> watched;
  for (auto& [place, handle] : st.members)
    ping_rank(self, st.book.member(place.first, place.second), handle, watched);
  for (auto& key : open)
    if (auto* r = st.book.find(key))
      for (auto& p : r->prefill)
        if (auto h = st.prefill.find(p); h != st.prefill.end())
          ping_rank(self, p, h->second, watched);
  // The re-probe: a prefill rank declared lost is pinged until it answers
  // (or forgotten after a Bootstrapping deadline).
  std::erase_if(st.lost_prefill,
                [&](auto& kv) { return now - kv.second.since > st.limits.bootstrapping; });
  for (auto& [rank, lost] : st.lost_prefill)
    ping_rank(self, rank, lost.handle, watched);
  forget_unwatched(self, watched, now);
  if (!open.empty() || !st.members.empty() || !st.lost_prefill.empty())
    arm_heartbeat(self);
}

/// Member `m` is gone (`reason` in words; `link`: lost by its link or its
/// process, where it may live on cut off): its rooms fail, it is missing
/// until it registers again, and it is forgotten.
void lose_member(self_ptr self,
                 std::map<std::pair<uint32_t, uint32_t>, decode_rank_actor>::iterator m,
                 const std::string& reason, bool link, spdlog::level::level_enum level) {
  auto& st = self->state;
  auto gone = st.book.member(m->first.first, m->first.second);
  if (st.figures)
    st.figures->standing(gone, false);
  log().log(level, "{} {} went down: {}", who(self), to_string(gone), reason);
  // Lost by its link, it may live on and conclude on its own: the one cause
  // both sides of a cut word alike.
  failure why = link ? decider_lost(decider_ref(st.book.instance()))
                     : failure{errc::peer_down,
                               "decode " + to_string(gone) + " went down (" + reason + ")", gone};
  fail_rooms_of(self, gone, why);
  st.missing.went(gone, "went down (" + reason + ")", wall_ns());
  if (auto l = st.member_life.find(m->first); l != st.member_life.end()) {
    st.lives.forget(l->second);
    st.member_life.erase(l);
  }
  st.members.erase(m);
  auto members = live_members(self);
  for (auto id : st.book.ids())
    st.book.forget_if_done(id, members);
  forget_unnamed_prefill(self);
}

void on_life_ended(self_ptr self, const life_ended& e) {
  auto& st = self->state;
  if (!e.died)
    return;  // ended in order: its down_msg says so
  // Every member its process hosted.
  std::vector<std::pair<uint32_t, uint32_t>> gone;
  for (auto& [place, name] : st.member_life)
    if (name == e.name)
      gone.push_back(place);
  for (auto& place : gone)
    if (auto m = st.members.find(place); m != st.members.end())
      lose_member(self, m, "its process died, seen by its life token", true, spdlog::level::warn);
}

/// A monitored actor went down: a member (its rooms fail, and it is
/// forgotten), or a prefill participant (its rooms fail).
void on_down(self_ptr self, const caf::down_msg& dm) {
  auto& st = self->state;
  for (auto m = st.members.begin(); m != st.members.end(); ++m) {
    if (m->second.address() != dm.source)
      continue;
    lose_member(
        self, m, caf::to_string(dm.reason), link_lost(dm.reason),
        dm.reason == caf::exit_reason::user_shutdown ? spdlog::level::info : spdlog::level::warn);
    return;
  }
  for (auto& [rank, handle] : st.prefill) {
    if (handle.address() != dm.source)
      continue;
    auto gone = rank;
    st.lost_prefill.erase(rank);
    if (st.figures)
      st.figures->standing(gone, false);
    if (link_lost(dm.reason))
      st.reached.erase(handle.node());  // its connection is gone
    log().log(
        dm.reason == caf::exit_reason::user_shutdown ? spdlog::level::info : spdlog::level::warn,
        "{} prefill {} went down: {}", who(self), to_string(gone), caf::to_string(dm.reason));
    // Lost by its link (killed, or cut off and alive): a prefill rank cut
    // off concludes with decider_lost() without hearing from this side, so
    // the rooms fail with that, on every rank that still hears the verdict.
    fail_rooms_of(self, gone,
                  link_lost(dm.reason) ? decider_lost(decider_ref(st.book.instance()))
                                       : failure{errc::peer_down,
                                                 "prefill " + to_string(gone) + " went down (" +
                                                     caf::to_string(dm.reason) + ")",
                                                 gone});
    return;
  }
}

/// Connects to the process of each prefill rank (their control endpoints),
/// each once: then every message between this decider and those ranks crosses
/// a connection this side opened.
caf::result<reach_peers> reach(self_ptr self, reach_peers& ask) {
  auto& st = self->state;
  std::map<caf::node_id, control_endpoint> by_node;  // the lowest endpoint of each
  for (auto& r : ask.ranks) {
    auto node = r.handle.node();
    if (!r.control.published() || node == self->node() || st.reached.count(node))
      continue;
    auto [i, fresh] = by_node.emplace(node, r.control);
    if (!fresh && r.control < i->second)
      i->second = r.control;
  }
  std::vector<std::pair<caf::node_id, control_endpoint>> todo{by_node.begin(), by_node.end()};
  for (auto& [node, at] : todo)
    st.reached.insert(node);  // asked once, also by a concurrent reach_peers
  if (todo.empty())
    return ask;
  auto rp = std::make_shared<caf::typed_response_promise<reach_peers>>(
      self->make_response_promise<reach_peers>());
  auto left = std::make_shared<size_t>(todo.size());
  auto missed = std::make_shared<std::string>();  // endpoints not reached, and why
  for (auto& [node, at] : todo)
    resolve_published<prefill_rank_actor>(
        self, prefill_rank_actor{}, at.host, at.port, reach_timeout, "prefill rank",
        guard(self, on_exception,
              [self, node = node, at = at, rp, left,
               missed](caf::expected<prefill_rank_actor> found) {
                if (!found) {
                  self->state.reached.erase(node);  // the next handshake tries again
                  auto why = self->system().render(found.error());
                  log().warn("{} cannot connect to the prefill rank at {}: {}", who(self), at.key(),
                             why);
                  *missed += (missed->empty() ? "" : "; ") + at.key() + ": " + why;
                }
                if (--*left > 0)
                  return;
                // Not reached, a rank would hear this decider only through a
                // third process: the handshake fails and is tried again.
                if (missed->empty())
                  rp->deliver(reach_peers{});
                else
                  rp->deliver(make_error(errc::connect_failed,
                                         "the decider could not connect to " + *missed));
              }));
  return *rp;
}

}  // namespace kvferry::decider_steps
