// The decode rank's handshakes: finding each prefill instance through its
// bootstrap, reading its topology into this rank's sources (prefill_peer),
// connecting to their processes, registering with each source, and joining
// this instance's decider. Losing them is decode_peers.cpp's.
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

using stage = prefill_peer::stage;

constexpr auto request_timeout = std::chrono::seconds{5};

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
      "prefill rank", guard(self, on_exception, [then](caf::expected<prefill_rank_actor> found) {
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
      .then(guard(self, on_exception,
                  [self, key, round](reach_peers&) {
                    auto p = self->state.peers.find(key);
                    if (p == self->state.peers.end() || !p->second.current(round))
                      return;
                    p->second.decider_reached = true;
                    maybe_ready(self, key);
                  }),
            guard(self, on_exception, [self, key, round](caf::error& err) {
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
    dest_registration mine{st.cfg.self,
                           caf::actor_cast<decode_rank_actor>(self),
                           st.cfg.data_endpoint,
                           st.cfg.pool.layout,
                           st.cfg.staging,
                           st.cfg.net->credential_for(writer),
                           st.cfg.checksum == kv_checksum::off ? "" : to_string(st.cfg.checksum)};
    self->request(handle, timeout, std::move(mine))
        .then(guard(self, on_exception,
                    [self, key, round, rank](dest_accepted& ok) {
                      on_accepted(self, key, round, rank, ok.staged);
                    }),
              guard(self, on_exception, [self, key, round, rank](caf::error& err) {
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

}  // namespace

void on_topology(self_ptr self, const std::string& key, topology topo) {
  auto& st = self->state;
  auto p = st.peers.find(key);
  if (p == st.peers.end())
    return;
  auto& peer = p->second;
  auto& me = st.cfg.self;
  auto whole = instance_ref(role::prefill, topo.instance, topo.instance_generation);
  if (auto old = st.incarnations_seen.stale(whole, me)) {
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
    mark_down(self, key, cause, cause, std::move(survivors),
              departed_orderly(topo) ? spdlog::level::info : spdlog::level::warn);
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
  if (auto seen = st.incarnations_seen.note(whole); seen.replaced)
    log().warn("{} {}", who(self), incarnations::restarted(whole, seen.previous, me).cause);
  auto plan = peer.read(topo, me, st.cfg.pool.layout, {st.cfg.tp_size, st.cfg.pp_size});
  switch (plan.what) {
    case prefill_peer::reading::action::refused:
      refuse(self, key, std::move(plan.refusal));
      return;
    case prefill_peer::reading::action::retry:
      resolve_failed(self, key, std::move(plan.error));
      return;
    case prefill_peer::reading::action::handshake:
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
  resolve_bootstrap(
      self, peer.where, request_timeout,
      guard(self, on_exception, [self, key](caf::expected<bootstrap_actor> found) {
        if (!found) {
          resolve_failed(self, key, self->system().render(found.error()));
          return;
        }
        if (auto p = self->state.peers.find(key); p != self->state.peers.end())
          p->second.bootstrap_node = found->node();
        self->request(*found, request_timeout, topology_atom_v)
            .then(guard(self, on_exception,
                        [self, key](topology& topo) { on_topology(self, key, std::move(topo)); }),
                  guard(self, on_exception, [self, key](caf::error& err) {
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
      guard(self, on_exception, [self](caf::expected<decider_actor> found) {
        auto& st = self->state;
        if (!found) {
          log().warn("{} cannot reach the decider: {}; retrying", who(self),
                     self->system().render(found.error()));
          self->delayed_send(self, register_retry, register_atom_v);
          return;
        }
        st.decider = *found;
        member_registration reg{st.cfg.self, caf::actor_cast<decode_rank_actor>(self),
                                st.cfg.tp_size, st.cfg.pp_size, st.cfg.life};
        self->request(st.decider, request_timeout, std::move(reg))
            .then(guard(self, on_exception,
                        [self](member_ack& ack) {
                          auto& st = self->state;
                          st.registered = true;
                          st.cfg.self.instance = ack.instance;
                          st.cfg.self.instance_generation = ack.instance_generation;
                          self->monitor(st.decider);
                          log().info("{} joined the decider of {}", who(self), ack.instance);
                          for (auto& [id, room] : st.rooms) {
                            join(self, room);
                            advance(self, room);
                          }
                          for (auto& [key, peer] : st.peers)
                            start_resolve(self, key);
                        }),
                  guard(self, on_exception, [self](caf::error& err) {
                    log().error("{} refused by the decider: {}; retrying", who(self),
                                self->system().render(err));
                    self->delayed_send(self, register_retry, register_atom_v);
                  }));
      }));
}

}  // namespace kvferry::decode_steps
