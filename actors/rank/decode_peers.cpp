// The decode rank's prefill side: finding each prefill instance through its
// bootstrap, the handshake with its ranks, and losing them. The record of
// each instance is a prefill_peer (plain logic); this file does the lookups,
// requests and timers around it.
#include <algorithm>
#include <chrono>

#include <caf/actor_cast.hpp>

#include "actors/log.hpp"
#include "actors/rank/decider_side.hpp"
#include "actors/rank/decode_rank_steps.hpp"
#include "actors/rank/rank_guard.hpp"
#include "actors/remote_lookup.hpp"

namespace kvferry::decode_steps {

namespace {

using stage = prefill_peer::stage;

constexpr auto request_timeout = std::chrono::seconds{5};
constexpr auto register_retry = std::chrono::seconds{1};

void refuse(self_ptr self, const std::string& key, failure why) {
  self->state.peers.at(key).refuse(why);
  log().error("{} prefill instance at {} refused: {}", who(self), key, to_string(why));
  for_rooms_of(self, key, [&](decode_room& room) {
    join(self, room);  // the decider tells the prefill side too
    report(self, room, why);
  });
}

/// Schedules the next look at a peer that is down (backoff up to a second):
/// it stays down, and new rooms fail at once, until a probe finds it whole.
void arm_probe(self_ptr self, prefill_peer& peer, const std::string& key) {
  if (peer.arm_probe())
    self->delayed_send(self, peer.backoff(), retry_atom_v, key);
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
  }
}

/// The handshake is done once every source accepted this rank and the
/// decider reached the instance's ranks.
void maybe_ready(self_ptr self, const std::string& key) {
  auto p = self->state.peers.find(key);
  if (p == self->state.peers.end() || !p->second.handshake_done())
    return;
  auto& peer = p->second;
  bool was_down = peer.come_up();
  if (was_down && self->state.cfg.board)
    self->state.cfg.board->set_up(key);
  if (was_down)
    log().info("{} prefill instance {} at {} is back: new rooms go to it again", who(self),
               peer.instance, key);
  for (auto& [rank, handle] : peer.handles)
    self->monitor(handle);
  log().info("{} handshake with prefill instance at {} done ({} source rank{})", who(self), key,
             peer.sources.size(), peer.sources.size() == 1 ? "" : "s");
  for (auto& [id, room] : self->state.rooms)
    if (room.peer() == key) {
      join(self, room);  // also rooms that failed meanwhile: their verdict reaches prefill
      advance(self, room);
    }
}

void on_accepted(self_ptr self, const std::string& key, uint64_t round, const rank_ref& src,
                 bool staged) {
  auto p = self->state.peers.find(key);
  if (p == self->state.peers.end() || !p->second.current(round))
    return;
  p->second.accept(src, staged && self->state.cfg.staging.offered());
  maybe_ready(self, key);
}

/// The prefill instance at `key` cannot serve rooms now: its live rooms here
/// fail with `why`, new ones fail at once with `cause` until a probe finds it
/// whole again. `survivors` are its ranks still there (the room's prefill
/// side for the decider); none keeps the ones known.
void mark_down(self_ptr self, const std::string& key, const failure& why, failure cause,
               std::optional<std::vector<participant>> survivors = std::nullopt) {
  auto& st = self->state;
  auto p = st.peers.find(key);
  if (p == st.peers.end())
    return;
  auto& peer = p->second;
  auto change = peer.go_down(std::move(cause), std::move(survivors));
  if (st.cfg.board)
    st.cfg.board->set_down(key, peer.down_cause);
  if (change.fresh) {
    log().warn("{} prefill instance {} at {} is down: new rooms to it fail at once ({})", who(self),
               peer.instance.empty() ? key : peer.instance, key, to_string(peer.down_cause));
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

/// Connects straight to the process of prefill rank `reg` (unless it is
/// this process or its bootstrap's, already reached), then calls `then()`.
template <class Then>
void reach_rank(self_ptr self, const prefill_peer& peer, const rank_registration& reg, Then then) {
  auto node = reg.handle.node();
  if (!reg.control.published() || node == self->node() || node == peer.bootstrap_node) {
    then(std::string{});
    return;
  }
  // One endpoint per process (a per-rank process publishes one rank): every
  // actor of this process that connects to it asks the middleman for the
  // same host:port, which it connects to once.
  resolve_published<prefill_rank_actor>(
      self, prefill_rank_actor{}, reg.control.host, reg.control.port, request_timeout,
      "prefill rank", guarded_callback(self, [then](caf::expected<prefill_rank_actor> found) {
        then(found ? std::string{} : caf::to_string(found.error()));
      }));
}

/// Asks the decider to connect to the instance's ranks before any room names
/// them (reach_peers), unless none lives in a process of its own.
void reach_from_decider(self_ptr self, const std::string& key, uint64_t round) {
  auto& st = self->state;
  auto& peer = st.peers.at(key);
  // Never a second connection between two processes: CAF 0.17 may drop the
  // first one with it. A decider in this process shares this process's
  // connection to the bootstrap's node: the decode ranks of the process
  // connect to every prefill process they receive from (every prefill rank is
  // some decode rank's source), and a second connection to the same process
  // at the same time can stall one of the two connects.
  if (st.decider.node() == self->node()) {
    peer.decider_reached = true;
    return;
  }
  reach_peers ask;
  for (auto& r : peer.everyone)
    if (r.control.published() && r.handle.node() != st.decider.node())
      ask.ranks.push_back(r);
  if (ask.ranks.empty()) {
    peer.decider_reached = true;
    return;
  }
  self->request(st.decider, request_timeout, std::move(ask))
      .then(guarded_callback(self,
                             [self, key, round](reach_peers&) {
                               auto p = self->state.peers.find(key);
                               if (p == self->state.peers.end() || !p->second.current(round))
                                 return;
                               p->second.decider_reached = true;
                               maybe_ready(self, key);
                             }),
            guarded_callback(self, [self, key, round](caf::error& err) {
              auto p = self->state.peers.find(key);
              if (p == self->state.peers.end() || !p->second.current(round))
                return;
              resolve_failed(
                  self, key,
                  "the decider could not reach the prefill ranks: " + self->system().render(err));
            }));
}

/// Registers this rank with source `rank` of the instance at `key` (its
/// process reached first), for handshake `round`.
void register_with_source(self_ptr self, const std::string& key, uint64_t round,
                          const rank_registration& reg) {
  auto rank = reg.rank;
  auto handle = reg.handle;
  auto writer = reg.data_endpoint;
  auto& peer = self->state.peers.at(key);
  reach_rank(self, peer, reg, [self, key, round, rank, handle, writer](std::string error) {
    auto p = self->state.peers.find(key);
    if (p == self->state.peers.end() || !p->second.current(round))
      return;
    if (!error.empty()) {
      resolve_failed(self, key, "connecting to " + to_string(rank) + ": " + error);
      return;
    }
    auto& st = self->state;
    auto timeout =
        p->second.phase == stage::down ? st.cfg.limits.silence() : caf::timespan{request_timeout};
    // The credential its transport proves to this rank's receiver: the data
    // plane admits no one the control plane did not introduce.
    dest_registration mine{st.cfg.self,          caf::actor_cast<decode_rank_actor>(self),
                           st.cfg.data_endpoint, st.cfg.pool.layout,
                           st.cfg.staging,       st.cfg.net->credential_for(writer)};
    self->request(handle, timeout, std::move(mine))
        .then(guarded_callback(self,
                               [self, key, round, rank](dest_accepted& ok) {
                                 on_accepted(self, key, round, rank, ok.staged);
                               }),
              guarded_callback(self, [self, key, round, rank](caf::error& err) {
                auto p = self->state.peers.find(key);
                if (p == self->state.peers.end() || !p->second.current(round))
                  return;
                auto why = to_failure(err, self->state.cfg.self);
                if (why.code == errc::layout_mismatch || why.code == errc::unsupported) {
                  why.origin = rank;
                  refuse(self, key, std::move(why));
                } else {
                  resolve_failed(
                      self, key,
                      "registration with " + to_string(rank) + ": " + self->system().render(err));
                }
              }));
  });
}

/// Forgets the prefill instance at `p`: its live rooms here fail with `why`,
/// and later rooms look it up again (it may have restarted, and every rank
/// must name the new one).
void drop_peer(self_ptr self, decltype(decode_rank_state::peers)::iterator p, const failure& why) {
  for_rooms_of(self, p->first, [&](decode_room& room) { report(self, room, why); });
  for (auto& [rank, handle] : p->second.handles)
    self->demonitor(handle.address());
  self->state.peers.erase(p);
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
/// instance is looked up again for the next rooms: its handles here may be of
/// a dead incarnation.
void forget_cut_off_source(self_ptr self, const decode_room& room, const failure& why) {
  auto& st = self->state;
  if (why != decider_lost(decider_ref(st.cfg.self.instance)))
    return;
  auto p = st.peers.find(room.peer());
  if (p == st.peers.end() || p->second.in_flight || !room.has_sources())
    return;
  // Only the incarnation the room was bound to: a lookup made since may have
  // found the next one already.
  if (!p->second.same_sources(room.sources().front().rank))
    return;
  log().info(
      "{} {}: contact with the prefill instance at {} may be lost: it is looked up again "
      "for the next rooms",
      who(self), to_string(room.key()), p->first);
  drop_peer(self, p, why);
}

}  // namespace

void on_topology(self_ptr self, const std::string& key, topology topo) {
  auto& st = self->state;
  auto p = st.peers.find(key);
  if (p == st.peers.end())
    return;
  auto& peer = p->second;
  auto& me = st.cfg.self;
  auto whole = instance_ref(role::prefill, topo.instance, topo.instance_generation);
  if (auto old = st.generations.stale(whole, me)) {
    resolve_failed(self, key, old->cause);  // an old bootstrap still answers: ask again
    return;
  }
  if (topo.dead()) {
    // A rank left and has not come back: the instance serves no room.
    std::vector<participant> survivors;
    for (auto& r : topo.ranks)
      survivors.push_back({r.rank, r.handle, r.control});
    peer.instance = topo.instance;
    auto cause = *instance_dead(topo);
    mark_down(self, key, cause, cause, std::move(survivors));
    auto& again = st.peers.at(key);
    again.in_flight = false;
    ++again.attempts;
    return;
  }
  if (!topo.complete()) {
    resolve_failed(self, key,
                   "prefill instance " + topo.instance + " has " +
                       std::to_string(topo.ranks.size()) + " of " +
                       std::to_string(size_t{topo.tp_size} * topo.pp_size) + " ranks registered");
    return;
  }
  if (auto seen = st.generations.note(whole); seen.replaced)
    log().warn("{} {}", who(self), incarnations::restarted(whole, seen.previous, me).cause);
  auto plan = peer.read(topo, me, st.cfg.pool.layout, {st.cfg.tp_size, st.cfg.pp_size});
  switch (plan.what) {
    case prefill_peer::reading::verdict::refused:
      refuse(self, key, std::move(plan.refusal));
      return;
    case prefill_peer::reading::verdict::retry:
      resolve_failed(self, key, std::move(plan.error));
      return;
    case prefill_peer::reading::verdict::handshake:
      break;
  }
  reach_from_decider(self, key, plan.round);
  for (auto& reg : plan.sources)
    register_with_source(self, key, plan.round, reg);
}

void start_resolve(self_ptr self, const std::string& key) {
  auto& peer = self->state.peers.at(key);
  // The handshake names this rank: wait for the decider to give it its
  // instance generation.
  if (peer.in_flight || (peer.phase != stage::resolving && peer.phase != stage::down) ||
      !self->state.registered)
    return;
  peer.in_flight = true;
  resolve_published<bootstrap_actor>(
      self, peer.where.handle, peer.where.host, peer.where.port, request_timeout, "bootstrap",
      guarded_callback(self, [self, key](caf::expected<bootstrap_actor> found) {
        if (!found) {
          resolve_failed(self, key, self->system().render(found.error()));
          return;
        }
        if (auto p = self->state.peers.find(key); p != self->state.peers.end())
          p->second.bootstrap_node = found->node();
        self->request(*found, request_timeout, topology_atom_v)
            .then(
                guarded_callback(
                    self, [self, key](topology& topo) { on_topology(self, key, std::move(topo)); }),
                guarded_callback(self, [self, key](caf::error& err) {
                  // An exception inside the bootstrap: the rooms waiting for
                  // its answer fail with it now (a retry may meet it again,
                  // and their deadline would name less). Later rooms ask again.
                  if (err.category() == error_category &&
                      static_cast<errc>(err.code()) == errc::internal) {
                    auto why = to_failure(err, self->state.cfg.self);
                    for_rooms_of(self, key, [&](decode_room& room) { report(self, room, why); });
                  }
                  resolve_failed(self, key, "topology query: " + self->system().render(err));
                }));
      }));
}

void probe(self_ptr self, const std::string& key) {
  auto p = self->state.peers.find(key);
  if (p == self->state.peers.end())
    return;
  p->second.probe_armed = false;
  start_resolve(self, key);
}

void on_whole_again(self_ptr self, topology topo) {
  if (!topo.complete() || topo.dead())
    return;
  for (auto& [key, peer] : self->state.peers)
    if (peer.instance == topo.instance && peer.phase == stage::down) {
      peer.in_flight = true;
      on_topology(self, key, std::move(topo));
      return;
    }
}

void register_with_decider(self_ptr self) {
  auto& loc = self->state.cfg.decider;
  resolve_published<decider_actor>(
      self, loc.handle, loc.host, loc.port, request_timeout, "decider",
      guarded_callback(self, [self](caf::expected<decider_actor> found) {
        auto& st = self->state;
        if (!found) {
          log().warn("{} cannot reach the decider: {}; retrying", who(self),
                     self->system().render(found.error()));
          self->delayed_send(self, register_retry, register_atom_v);
          return;
        }
        st.decider = *found;
        member_registration reg{st.cfg.self, caf::actor_cast<decode_rank_actor>(self),
                                st.cfg.tp_size, st.cfg.pp_size};
        self->request(st.decider, request_timeout, std::move(reg))
            .then(guarded_callback(self,
                                   [self](member_ack& ack) {
                                     auto& st = self->state;
                                     st.registered = true;
                                     st.cfg.self.instance = ack.instance;
                                     st.cfg.self.instance_generation = ack.instance_generation;
                                     self->monitor(st.decider);
                                     log().info("{} joined the decider of {}", who(self),
                                                ack.instance);
                                     for (auto& [id, room] : st.rooms) {
                                       join(self, room);
                                       advance(self, room);
                                     }
                                     for (auto& [key, peer] : st.peers)
                                       start_resolve(self, key);
                                   }),
                  guarded_callback(self, [self](caf::error& err) {
                    log().error("{} refused by the decider: {}; retrying", who(self),
                                self->system().render(err));
                    self->delayed_send(self, register_retry, register_atom_v);
                  }));
      }));
}

void fail_fast(self_ptr self, decode_room& room, const prefill_peer& peer) {
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
      mark_down(self, p->first, why, cause, std::move(survivors));
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
