#include "actors/decision/decider_actor.hpp"

#include <chrono>
#include <random>
#include <set>

#include <caf/actor_cast.hpp>
#include <caf/send.hpp>

#include "actors/common/decider_lost.hpp"
#include "actors/common/durations.hpp"
#include "actors/gateway/peer_names.hpp"
#include "actors/guard.hpp"
#include "actors/log.hpp"
#include "actors/remote_lookup.hpp"

namespace kvferry {

namespace {

using self_ptr = decider_actor::stateful_pointer<decider_state>;

/// How long the decider waits for a connection to a prefill rank's process:
/// a loaded machine can take longer than a heartbeat silence to accept, and
/// the asking decode rank waits 5 s for the answer.
constexpr auto reach_timeout = std::chrono::seconds{4};

std::string who(self_ptr self) {
  return "[decider " + self->state.book.instance() + "]";
}

failure on_exception(self_ptr self, const std::string& what);

/// `f` (a response callback, the down handler), with what it throws caught
/// like a handler's.
template <class F>
auto guarded_callback(self_ptr self, F f) {
  return guard([self](const std::string& what) { return on_exception(self, what); }, std::move(f));
}

/// Sends the verdict to every decode rank that joined the room and every
/// prefill participant.
/// True when the message being handled comes from the registered decode rank
/// at `rank`'s place; else it is dropped (what: the message, for the log).
bool from_member(self_ptr self, const rank_ref& rank, std::string_view what) {
  auto& m = self->state.members;
  auto i = m.find({rank.tp, rank.pp});
  auto sender = caf::actor_cast<caf::actor_addr>(self->current_sender());
  if (i != m.end() && sender && i->second.address() == sender)
    return true;
  drop_stranger(self, who(self), what);
  return false;
}

/// True when the message being handled comes from a registered decode rank,
/// or from a prefill rank some room named (`rank`, when given, must be the
/// sender's); else it is dropped.
bool from_participant(self_ptr self, const rank_ref* rank, std::string_view what) {
  auto& st = self->state;
  auto sender = caf::actor_cast<caf::actor_addr>(self->current_sender());
  if (sender) {
    for (auto& [place, handle] : st.members)
      if (handle.address() == sender &&
          (!rank || (rank->tp == place.first && rank->pp == place.second)))
        return true;
    if (rank) {
      if (auto p = st.prefill.find(*rank); p != st.prefill.end() && p->second.address() == sender)
        return true;
    } else {
      for (auto& [r, handle] : st.prefill)
        if (handle.address() == sender)
          return true;
    }
  }
  drop_stranger(self, who(self), what);
  return false;
}

void broadcast(self_ptr self, const decision_book::room& r, const verdict& v) {
  auto& st = self->state;
  room_verdict msg{r.key, v.outcome, v.why};
  // Kept until every member released it; a member that never joins is waited
  // for as long as a room may stay in Bootstrapping.
  self->delayed_send(self, st.limits.bootstrapping, expire_atom_v, r.key.room, r.key.generation);
  if (v.outcome == kv_poll::failed)
    log().info("{} {}: Failed: {}", who(self), to_string(r.key), to_string(v.why));
  for (auto& d : r.joined)
    if (auto m = st.members.find({d.tp, d.pp}); m != st.members.end())
      self->send(m->second, msg);
  for (auto& p : r.prefill)
    if (auto h = st.prefill.find(p); h != st.prefill.end())
      self->send(h->second, msg);
}

/// True (and the room failed with that cause) if a participant of undecided
/// room `r` may already have declared this decider lost: it has answered no
/// ping sent within the lease. Members are pinged all the time (from their
/// registration on), so a decider that was frozen or cut off knows it when it
/// comes back, even for rooms whose joins waited for it meanwhile; a prefill
/// participant starts watching only once asked, after the room opened here.
/// Every verdict checks it first, so no rank concludes otherwise than the
/// one that gave up.
bool lapsed(self_ptr self, decision_book::room& r) {
  auto& st = self->state;
  if (r.decision.decided())
    return false;
  auto now = self->clock().now();
  for (auto& p : r.decision.participants()) {
    auto a = st.answered_at.find(p);
    auto j = r.joined_at.find(p);
    auto basis = r.opened;
    if (p.side == role::decode && (a != st.answered_at.end() || j != r.joined_at.end())) {
      // A member: its last answered ping, or its join for this room if that
      // was heard while this decider kept time.
      basis = caf::actor_clock::time_point{};
      if (a != st.answered_at.end())
        basis = a->second;
      if (j != r.joined_at.end() && j->second > basis)
        basis = j->second;
    } else if (a != st.answered_at.end() && a->second > basis) {
      basis = a->second;
    }
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

/// The decode ranks registered now, as the book names them.
std::set<rank_ref> live_members(self_ptr self) {
  std::set<rank_ref> out;
  for (auto& [place, handle] : self->state.members)
    out.insert(self->state.book.member(place.first, place.second));
  return out;
}

/// Drops the handles of prefill ranks that no room on record names any more.
void forget_unnamed_prefill(self_ptr self) {
  auto& st = self->state;
  std::set<rank_ref> named;
  for (auto& [id, r] : st.book.rooms())
    named.insert(r.prefill.begin(), r.prefill.end());
  std::erase_if(st.prefill, [&](auto& kv) {
    if (named.count(kv.first))
      return false;
    self->demonitor(kv.second.address());
    return true;
  });
}

/// Schedules the next heartbeat round unless one is.
void arm_heartbeat(self_ptr self) {
  auto& st = self->state;
  if (st.beating)
    return;
  st.beating = true;
  st.beat_due = self->clock().now() + st.limits.heartbeat;
  self->delayed_send(self, st.limits.heartbeat, beat_atom_v);
}

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

/// A ping to `who` went unanswered; enough in a row and it is lost.
void missed(self_ptr self, const rank_ref& peer) {
  auto& st = self->state;
  auto v = st.beats.missed(peer);
  if (v == liveness<rank_ref>::verdict::alive)
    return;
  auto cause = to_string(peer) + " answered none of " + std::to_string(st.beats.misses()) +
               " heartbeats in a row (" + format_duration(st.limits.silence()) + ")";
  failure why{errc::heartbeat_lost, cause, peer};
  if (v == liveness<rank_ref>::verdict::newly_lost) {
    log().warn("{} {}: declared lost", who(self), cause);
    if (peer.side == role::prefill)
      if (auto h = st.prefill.find(peer); h != st.prefill.end())
        st.lost_prefill.insert_or_assign(
            peer, decider_state::lost_rank{h->second, why, self->clock().now()});
  }
  fail_rooms_of(self, peer, why);
}

/// Pings every member (always: see lapsed()), and every prefill participant
/// of an undecided room.
void heartbeat_round(self_ptr self) {
  auto& st = self->state;
  st.beating = false;
  auto now = self->clock().now();
  st.last_round = now;
  if (now - st.beat_due > st.limits.heartbeat) {
    log().warn("{} stalled for {}", who(self), format_duration(now - st.beat_due));
    st.stall_end = now;
  }
  for (auto& key : st.book.undecided())
    if (auto* r = st.book.find(key))
      lapsed(self, *r);
  auto open = st.book.undecided();
  std::set<rank_ref> watched;
  auto ping = [&](const rank_ref& r, const auto& handle) {
    watched.insert(r);
    if (!st.beats.ping(r))
      return;  // the last ping is still out
    auto sent = self->clock().now();
    self->request(handle, st.limits.heartbeat, heartbeat_atom_v, ++st.pings)
        .then(guarded_callback(self,
                               [self, r, sent](heartbeat_atom, uint64_t) {
                                 auto& st = self->state;
                                 if (st.lost_prefill.erase(r) > 0)
                                   log().info("{} {} answers again: rooms may name it again",
                                              who(self), to_string(r));
                                 if (!st.beats.watching(r))
                                   return;  // no longer watched
                                 st.beats.answered(r);
                                 auto& at = st.answered_at[r];
                                 at = std::max(at, sent);
                               }),
              guarded_callback(self, [self, r](caf::error&) { missed(self, r); }));
  };
  for (auto& [place, handle] : st.members)
    ping(st.book.member(place.first, place.second), handle);
  if (!open.empty()) {
    for (auto& key : open)
      if (auto* r = st.book.find(key))
        for (auto& p : r->prefill)
          if (auto h = st.prefill.find(p); h != st.prefill.end())
            ping(p, h->second);
  }
  // The re-probe: a prefill rank declared lost is pinged until it answers
  // (or forgotten after a Bootstrapping deadline).
  std::erase_if(st.lost_prefill,
                [&](auto& kv) { return now - kv.second.since > st.limits.bootstrapping; });
  for (auto& [rank, lost] : st.lost_prefill)
    ping(rank, lost.handle);
  st.beats.retain(watched);
  std::erase_if(st.answered_at, [&](auto& kv) { return !watched.count(kv.first); });
  forget_unnamed_prefill(self);
  if (!open.empty() || !st.members.empty() || !st.lost_prefill.empty())
    arm_heartbeat(self);
}

/// An exception escaped a handler: every undecided room fails with it, and
/// the decider carries on. The decider is no rank: its failures name it the
/// way the ranks do when it is lost (decider_ref, the decode instance).
failure on_exception(self_ptr self, const std::string& what) {
  auto& st = self->state;
  log().error("{} exception in a handler: {}; failing its undecided rooms", who(self), what);
  failure why{errc::internal, "exception in the decider of " + st.book.instance() + ": " + what,
              decider_ref(st.book.instance())};
  for (auto& key : st.book.undecided())
    if (auto* r = st.book.find(key))
      if (auto v = st.book.fail(*r, why))
        broadcast(self, *r, *v);
  return why;
}

}  // namespace

decider_actor::behavior_type decider(decider_actor::stateful_pointer<decider_state> self,
                                     std::string instance, uint32_t tp_size, uint32_t pp_size,
                                     uint64_t generation, deadlines limits) {
  return decider_on(self, std::move(instance), tp_size, pp_size, generation, limits, {});
}

decider_actor::behavior_type decider_on(decider_actor::stateful_pointer<decider_state> self,
                                        std::string instance, uint32_t tp_size, uint32_t pp_size,
                                        uint64_t generation, deadlines limits, std::string node) {
  self->state.node = std::move(node);
  std::random_device rd;
  self->state.limits = limits;
  self->state.beats = liveness<rank_ref>{limits.heartbeat_misses};
  self->state.book =
      decision_book{std::move(instance), generation, tp_size, pp_size, (uint64_t{rd()} << 32) | 1u};
  self->set_down_handler(guarded_callback(self, [self](caf::down_msg& dm) {
    auto& st = self->state;
    for (auto m = st.members.begin(); m != st.members.end(); ++m) {
      if (m->second.address() != dm.source)
        continue;
      auto gone = st.book.member(m->first.first, m->first.second);
      log().log(
          dm.reason == caf::exit_reason::user_shutdown ? spdlog::level::info : spdlog::level::warn,
          "{} {} went down: {}", who(self), to_string(gone), caf::to_string(dm.reason));
      // Lost by its link, it may live on and conclude on its own: the one
      // cause both sides of a cut word alike.
      failure why = link_lost(dm.reason) ? decider_lost(decider_ref(st.book.instance()))
                                         : failure{errc::peer_down,
                                                   "decode " + to_string(gone) + " went down (" +
                                                       caf::to_string(dm.reason) + ")",
                                                   gone};
      fail_rooms_of(self, gone, why);
      st.members.erase(m);
      auto members = live_members(self);
      for (auto id : st.book.ids())
        st.book.forget_if_done(id, members);
      forget_unnamed_prefill(self);
      return;
    }
    for (auto& [rank, handle] : st.prefill) {
      if (handle.address() != dm.source)
        continue;
      auto gone = rank;
      st.lost_prefill.erase(rank);
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
  }));
  return guarded<decider_actor::behavior_type>(
      [self](const std::string& what) { return on_exception(self, what); },
      [self](member_registration& reg) -> caf::result<member_ack> {
        auto& book = self->state.book;
        std::string why;
        if (auto s = self->current_sender();
            !s || !speaks_for(self->home_system(), s->node(), self->state.node, why)) {
          auto what = who(self) + " refused the registration of decode rank tp" +
                      std::to_string(reg.rank.tp) + " pp" + std::to_string(reg.rank.pp) + ": " +
                      why;
          log().warn("{}", what);
          return make_error(errc::invalid_argument, what);
        }
        if (reg.tp_size != book.tp_size() || reg.pp_size != book.pp_size() ||
            reg.rank.tp >= book.tp_size() || reg.rank.pp >= book.pp_size())
          return make_error(
              errc::invalid_argument,
              "decode rank tp" + std::to_string(reg.rank.tp) + " pp" + std::to_string(reg.rank.pp) +
                  " of TP " + std::to_string(reg.tp_size) + " x PP " + std::to_string(reg.pp_size) +
                  " joined decider of instance " + book.instance() + ", which has TP " +
                  std::to_string(book.tp_size()) + " x PP " + std::to_string(book.pp_size()));
        self->monitor(reg.handle);
        self->state.members.insert_or_assign({reg.rank.tp, reg.rank.pp}, reg.handle);
        // It hears from this decider now: the start of its lease.
        auto& at = self->state.answered_at[book.member(reg.rank.tp, reg.rank.pp)];
        at = std::max(at, self->clock().now());
        arm_heartbeat(self);
        log().info("{} {} joined", who(self), to_string(book.member(reg.rank.tp, reg.rank.pp)));
        return member_ack{book.instance(), book.instance_generation()};
      },
      [self](room_join& j) {
        if (!from_member(self, j.rank, "a room_join"))
          return;
        auto& st = self->state;
        auto joiner = caf::actor_cast<decode_rank_actor>(self->current_sender());
        if (!st.book.find(room_key{j.room, 0}))
          if (auto* t = st.book.late_join(j.room, j.rank)) {
            // Decided and forgotten before this member came: it learns how
            // the room ended, under the key everyone else concluded with (and
            // so do the prefill ranks it names).
            room_verdict v{t->key, t->outcome.outcome, t->outcome.why};
            self->send(joiner, room_keyed{t->key});
            self->send(joiner, v);
            for (auto& p : j.prefill)
              self->send(p.handle, v);
            return;
          }
        std::vector<rank_ref> prefill;
        for (auto& p : j.prefill) {
          prefill.push_back(p.rank);
          // Watched as the members are: a kill is known when its connection drops.
          if (auto h = st.prefill.find(p.rank); h == st.prefill.end() || h->second != p.handle) {
            self->monitor(p.handle);
            st.beats.answered(p.rank);  // a new incarnation of the rank starts alive
          }
          if (auto l = st.lost_prefill.find(p.rank);
              l != st.lost_prefill.end() && l->second.handle != p.handle)
            st.lost_prefill.erase(l);
          st.prefill.insert_or_assign(p.rank, p.handle);
        }
        bool known = st.book.find(room_key{j.room, 0}) != nullptr;
        auto before = known ? st.book.find(room_key{j.room, 0})->prefill : std::set<rank_ref>{};
        // The member was alive when it sent this; heard now, that is now,
        // unless this decider is late on its rounds or just caught up after
        // a stall (the join may have waited in its mailbox meanwhile).
        auto now = self->clock().now();
        std::optional<caf::actor_clock::time_point> heard;
        if (now - st.last_round <= 2 * st.limits.heartbeat &&
            now - st.stall_end >= st.limits.heartbeat)
          heard = now;
        auto& r = st.book.join(j.room, j.rank, prefill, now, heard);
        // A member declared lost that joins a room is alive again.
        if (st.beats.lost(st.book.member(j.rank.tp, j.rank.pp)))
          st.beats.answered(st.book.member(j.rank.tp, j.rank.pp));
        // A room that names a prefill rank declared lost fails at once with
        // that cause (instead of paying its own silence); the rank is probed
        // meanwhile and taken again once it answers.
        if (!r.decision.decided())
          for (auto& p : prefill)
            if (auto l = st.lost_prefill.find(p); l != st.lost_prefill.end()) {
              if (!lapsed(self, r))
                if (auto v = st.book.fail(r, l->second.why))
                  broadcast(self, r, *v);
              break;
            }
        if (!r.decision.decided())
          arm_heartbeat(self);
        self->send(joiner, room_keyed{r.key});
        // A room decided before this join: the newcomers learn the verdict now.
        if (auto& v = r.decision.outcome()) {
          room_verdict msg{r.key, v->outcome, v->why};
          self->send(joiner, msg);
          for (auto& p : r.prefill)
            if (!before.count(p))
              if (auto h = st.prefill.find(p); h != st.prefill.end())
                self->send(h->second, msg);
        }
      },
      [self](room_finished& f) {
        auto& book = self->state.book;
        // The room's exact key (its generation is drawn at random) also
        // admits a prefill rank of the room whose join has not come in yet:
        // its finish and the join travel on different connections.
        auto* keyed = f.key.generation != 0 ? book.find(f.key) : nullptr;
        if (!(keyed && keyed->prefill.count(f.rank)) &&
            !from_participant(self, &f.rank, "a room_finished"))
          return;
        auto* r = book.find(f.key);
        if (r && r->decision.decided()) {
          // A reminder from a rank that still waits: its verdict was lost on
          // the way (a route being set up); it hears it again.
          auto& v = *r->decision.outcome();
          caf::anon_send(caf::actor_cast<caf::actor>(self->current_sender()),
                         room_verdict{r->key, v.outcome, v.why});
          return;
        }
        if (r && !lapsed(self, *r))
          if (auto v = book.finish(*r, f.rank))
            broadcast(self, *r, *v);
      },
      [self](room_failure& f) {
        // As for room_finished: the exact key admits a failure that overtook
        // the join naming its rank.
        if (!(f.key.generation != 0 && self->state.book.find(f.key)) &&
            !from_participant(self, nullptr, "a room_failure"))
          return;
        auto& st = self->state;
        auto* r = st.book.find(f.key);
        if (!r && f.key.generation == 0) {
          // A member that concluded a room alone (this decider was silent
          // for it) before its join got here: the room starts with that
          // cause, so that the members that join later conclude the same.
          auto sender = caf::actor_cast<caf::actor_addr>(self->current_sender());
          for (auto& [place, handle] : st.members)
            if (handle.address() == sender) {
              r = &st.book.join(f.key.room, st.book.member(place.first, place.second), {},
                                self->clock().now());
              break;
            }
        }
        if (r && !lapsed(self, *r))
          if (auto v = st.book.fail(*r, std::move(f.why)))
            broadcast(self, *r, *v);
      },
      [self](reach_peers& ask) -> caf::result<reach_peers> {
        // Connect to the process of each prefill rank (their control
        // endpoints), each once: then every message between this decider and
        // those ranks crosses a connection this side opened.
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
              guarded_callback(self, [self, node = node, at = at, rp, left,
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
      },
      [self](room_leave& l) {
        if (!from_member(self, l.rank, "a room_leave"))
          return;
        if (self->state.book.leave(l.key, l.rank, live_members(self)))
          forget_unnamed_prefill(self);
      },
      [self](expire_atom, uint64_t id, uint64_t generation) {
        auto& book = self->state.book;
        room_key key{id, generation};
        if (!book.find(key))
          return;
        book.excuse_late(key);
        if (book.forget_if_done(id, live_members(self)))
          forget_unnamed_prefill(self);
      },
      [self](beat_atom) { heartbeat_round(self); });
}

}  // namespace kvferry
