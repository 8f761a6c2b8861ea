#include "actors/rank/decode_rank.hpp"

#include <algorithm>
#include <chrono>

#include <caf/actor_cast.hpp>

#include "actors/guard.hpp"
#include "actors/log.hpp"
#include "actors/plan/room_grant.hpp"
#include "actors/plan/tp_mapping.hpp"
#include "actors/rank/decider_heartbeat.hpp"
#include "actors/rank/rank_guard.hpp"
#include "actors/rank/room_steps.hpp"
#include "actors/remote_lookup.hpp"
#include "messages/room.hpp"
#include "messages/scheduler.hpp"

namespace kvferry {

namespace {

using self_ptr = decode_rank_actor::stateful_pointer<decode_rank_state>;
using peer_t = decode_rank_state::prefill_peer;

constexpr auto request_timeout = std::chrono::seconds{5};
constexpr auto retry_base = std::chrono::milliseconds{50};
constexpr auto retry_max = std::chrono::seconds{1};
constexpr auto register_retry = std::chrono::seconds{1};
constexpr uint32_t max_verdict_extensions = 2;

failure on_exception(self_ptr self, const std::string& what);

/// `f` (a response or lookup callback, the down handler), with what it
/// throws caught like a handler's.
template <class F>
auto guarded_callback(self_ptr self, F f) {
  return guard([self](const std::string& what) { return on_exception(self, what); }, std::move(f));
}

void sync(self_ptr self, decode_room& room) {
  publish(self, room.slot(), room.key(), room.fsm());
}

constexpr auto quiesce_every = std::chrono::milliseconds{10};

void arm_quiesce(self_ptr self) {
  if (self->state.quiesce_armed || self->state.draining.empty())
    return;
  self->state.quiesce_armed = true;
  self->delayed_send(self, quiesce_every, quiesce_atom_v);
}

/// Closes the room's fence: once nothing with it can land, its pages are
/// released to the scheduler. A room that never sent its requests never
/// opened one.
/// Nothing more can land in a concluded room's pages through the transport:
/// its pages go back to the scheduler, once its staging actor (if it stages)
/// closed it too, so that no scatter writes into them afterwards. The ring
/// space goes back then as well: no write into it can land any more either.
void release_quiet(self_ptr self, room_slot_ptr slot, const room_key& key, bool staged) {
  if (!staged) {
    if (slot)
      slot->release();
    return;
  }
  auto done = [slot] {
    if (slot)
      slot->release();
  };
  self->request(self->state.cfg.staging.handle, caf::infinite, staging_close{key})
      .then(guarded_callback(self, [done](staging_close&) { done(); }),
            // The staging actor is gone: it scatters nothing any more.
            guarded_callback(self, [done](caf::error&) { done(); }));
}

void release(self_ptr self, decode_room& room) {
  auto& st = self->state;
  auto token = room.key().generation;
  if (!room.requested() || st.cfg.net->close_fence(token)) {
    release_quiet(self, room.slot(), room.key(), room.staged());
    return;
  }
  decode_rank_state::drain d{room.slot(),   {},        self->clock().now(), false,
                             room.staged(), room.key()};
  for (auto& s : room.sources())
    if (!s.dummy)
      d.writers.push_back(s.endpoint);
  st.draining.insert_or_assign(token, std::move(d));
  arm_quiesce(self);
}

/// Concludes a room with the decider's verdict, then releases its pages.
void settle(self_ptr self, decode_room& room, kv_poll outcome, const failure& why) {
  bool was = room.fsm().terminal();
  conclude(self, self->state.cfg.self, room, outcome, why);
  if (!was && room.fsm().terminal())
    release(self, room);
}

/// A fault this rank saw in a room: the decider decides. Without a decider
/// to reach, the rank concludes alone.
void report(self_ptr self, decode_room& room, failure why) {
  auto& fsm = room.fsm();
  auto& st = self->state;
  if (fsm.terminal())
    return;
  if (fsm.awaiting_verdict()) {
    // Its part is done (or its first cause reported): a fault seen now still
    // concerns the room, and the decider keeps the first cause it got.
    if (st.registered)
      self->send(st.decider, room_failure{room.key(), std::move(why)});
    return;
  }
  if (!st.registered) {
    settle(self, room, kv_poll::failed, why);
    return;
  }
  log().info("{} {}: reporting to the decider: {}", who(self), to_string(room.key()),
             to_string(why));
  self->send(st.decider, room_failure{room.key(), why});
  room.set_reported(std::move(why));
  fsm.await_verdict();
  sync(self, room);
}

template <class F>
void for_rooms_of(self_ptr self, const std::string& key, F f) {
  for (auto& [id, room] : self->state.rooms)
    if (room.peer() == key && !room.fsm().terminal())
      f(room);
}

/// Tells the decider about the room: on open (to draw its key) and once the
/// prefill participants are known.
void join(self_ptr self, decode_room& room) {
  auto& st = self->state;
  if (!st.registered || room.announced())
    return;
  room_join j{room.key().room, st.cfg.self, {}};
  auto p = st.peers.find(room.peer());
  if (p != st.peers.end() && !p->second.everyone.empty()) {
    j.prefill = p->second.everyone;
    room.mark_announced();
  }
  self->send(st.decider, std::move(j));
  room.join_sent();
  // From now on the decider owes this room a verdict: it must stay heard from.
  if (!room.joined() && !room.fsm().terminal()) {
    room.mark_joined();
    auto& me = st.cfg.self;
    watch_decider(self, st.decider, decider_ref(me.instance));
  }
}

void send_requests(self_ptr self, decode_room& room) {
  auto& st = self->state;
  auto& peer = st.peers.at(room.peer());
  // Writes for this room land only while its fence is open, from its
  // sources, into its own pages, rows and slots (and the staging ring).
  std::vector<std::string> writers;
  bool staged_source = false;
  for (auto& src : room.sources())
    if (!src.dummy) {
      writers.push_back(src.endpoint);
      staged_source = staged_source || src.staged;
    }
  granted_ring ring;
  if (staged_source && st.cfg.staging.offered())
    ring = {st.cfg.staging.region, st.cfg.staging.size};
  st.cfg.net->open_fence(room.key().generation,
                         room_grant(st.cfg.pool.layout, std::move(writers), room.dst_pages(),
                                    room.aux_slot(), room.states(), ring));
  // Its staged sources write into the staging ring: the room opens there
  // first, so that their asks find it.
  staging_room staged{room.key(), room.dst_pages(), {}};
  for (auto& src : room.sources())
    if (src.staged && !src.dummy)
      staged.writers.push_back({src.rank, src.layout});
  if (!staged.writers.empty()) {
    self->send(st.cfg.staging.handle, std::move(staged));
    room.mark_staged();
  }
  for (auto& src : room.sources()) {
    room_request req{room.key(), st.cfg.self, st.decider, {}, no_aux_slot, {}, src.dummy};
    if (!src.dummy)
      req.dst_pages = room.dst_pages();
    if (src.writes_aux) {
      req.aux_slot = room.aux_slot();
      req.dst_states = room.states();
    }
    self->send(peer.handles.at(src.rank), std::move(req));
  }
  room.mark_requested();
}

/// Moves a room as far as what is known allows: sources once the peer is
/// ready, requests once it is keyed and initialized.
void advance(self_ptr self, decode_room& room) {
  if (room.fsm().terminal() || room.fsm().awaiting_verdict())
    return;
  auto p = self->state.peers.find(room.peer());
  if (p == self->state.peers.end() || p->second.phase != peer_t::stage::ready)
    return;
  if (!room.has_sources())
    room.set_sources(p->second.sources);
  join(self, room);
  // Requests go out only once the decider knows whom they go to: a prefill
  // rank that is asked is always one the verdict will reach.
  if (!room.keyed() || !room.announcement_keyed())
    return;
  room.fsm().advance(kv_poll::waiting_for_input);
  if (room.initialized() && !room.requested())
    send_requests(self, room);
  sync(self, room);
}

void refuse(self_ptr self, const std::string& key, failure why) {
  auto& peer = self->state.peers.at(key);
  peer.phase = peer_t::stage::refused;
  peer.refusal = why;
  peer.in_flight = false;
  log().error("{} prefill instance at {} refused: {}", who(self), key, to_string(why));
  for_rooms_of(self, key, [&](decode_room& room) {
    join(self, room);  // the decider tells the prefill side too
    report(self, room, why);
  });
}

void start_resolve(self_ptr self, const std::string& key);

/// Schedules the next look at a peer that is down (backoff up to retry_max):
/// it stays down, and new rooms fail at once, until a probe finds it whole.
void arm_probe(self_ptr self, peer_t& peer, const std::string& key) {
  if (peer.probe_armed)
    return;
  peer.probe_armed = true;
  auto delay = std::min<std::chrono::nanoseconds>(retry_base * (1u << std::min(peer.attempts, 5u)),
                                                  retry_max);
  self->delayed_send(self, delay, retry_atom_v, key);
}

void resolve_failed(self_ptr self, const std::string& key, std::string error) {
  auto p = self->state.peers.find(key);
  if (p == self->state.peers.end())
    return;
  auto& peer = p->second;
  peer.in_flight = false;
  peer.last_error = std::move(error);
  ++peer.attempts;
  if (peer.phase == peer_t::stage::down) {
    log().debug("{} prefill instance at {} still down (probe {}): {}", who(self), key,
                peer.attempts, peer.last_error);
    arm_probe(self, peer, key);
    return;
  }
  bool waiting = false;
  for_rooms_of(self, key, [&](decode_room&) { waiting = true; });
  log().debug("{} prefill instance at {} not ready (attempt {}): {}", who(self), key, peer.attempts,
              peer.last_error);
  if (!waiting)
    return;  // the next room restarts the resolve
  auto delay = std::min<std::chrono::nanoseconds>(retry_base * (1u << std::min(peer.attempts, 5u)),
                                                  retry_max);
  self->delayed_send(self, delay, retry_atom_v, key);
}

/// The handshake is done once every source accepted this rank and the
/// decider reached the instance's ranks.
void maybe_ready(self_ptr self, const std::string& key) {
  auto p = self->state.peers.find(key);
  if (p == self->state.peers.end())
    return;
  auto& peer = p->second;
  if ((peer.phase != peer_t::stage::resolving && peer.phase != peer_t::stage::down) ||
      !peer.in_flight || peer.accepted.size() < peer.sources.size() || !peer.decider_reached)
    return;
  bool was_down = peer.phase == peer_t::stage::down;
  peer.phase = peer_t::stage::ready;
  if (was_down && self->state.cfg.board)
    self->state.cfg.board->set_up(key);
  peer.probe_armed = false;
  if (was_down)
    log().info("{} prefill instance {} at {} is back: new rooms go to it again", who(self),
               peer.instance, key);
  peer.in_flight = false;
  peer.attempts = 0;
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
  if (p == self->state.peers.end() || p->second.round != round)
    return;
  auto& peer = p->second;
  peer.accepted.insert(src);
  for (auto& s : peer.sources)
    if (s.rank == src)
      s.staged = staged && self->state.cfg.staging.offered();
  maybe_ready(self, key);
}

/// A room that needs the down peer `peer`: the decider hears of it with the
/// prefill ranks still there (their rooms conclude the same), and it fails
/// at once with the peer's cause.
void fail_fast(self_ptr self, decode_room& room, const peer_t& peer) {
  join(self, room);
  report(self, room, peer.down_cause);
}

/// The prefill instance at `key` cannot serve rooms now: its live rooms here
/// fail with `why`, new ones fail at once with `cause` until a probe finds it
/// whole again. `survivors` are its ranks still there (the room's prefill
/// side for the decider); empty keeps the ones known.
void mark_down(self_ptr self, const std::string& key, const failure& why, failure cause,
               std::optional<std::vector<participant>> survivors = std::nullopt) {
  auto& st = self->state;
  auto p = st.peers.find(key);
  if (p == st.peers.end())
    return;
  auto& peer = p->second;
  bool fresh = peer.phase != peer_t::stage::down;
  if (fresh || peer.down_cause.code != errc::instance_dead)
    peer.down_cause = std::move(cause);  // a departure's words stay once known
  if (st.cfg.board)
    st.cfg.board->set_down(key, peer.down_cause);
  if (survivors)
    peer.everyone = std::move(*survivors);
  if (fresh) {
    log().warn("{} prefill instance {} at {} is down: new rooms to it fail at once ({})", who(self),
               peer.instance.empty() ? key : peer.instance, key, to_string(peer.down_cause));
    for (auto& [rank, handle] : peer.handles)
      self->demonitor(handle.address());
    peer.phase = peer_t::stage::down;
    peer.handles.clear();
    peer.accepted.clear();
    peer.sources.clear();
    ++peer.round;  // a handshake under way is void
    peer.in_flight = false;
    peer.attempts = 0;
  }
  // Live rooms: those bound to it fail with what happened to them; those
  // still waiting for it fail with the peer's cause.
  for_rooms_of(self, key, [&](decode_room& room) {
    if (room.fsm().awaiting_verdict() && !fresh)
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
void reach_rank(self_ptr self, const peer_t& peer, const rank_registration& reg, Then then) {
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
  // connection to the bootstrap's node.
  bool local_decider = st.decider.node() == self->node();
  if (local_decider) {
    // The decider shares this process: the decode ranks of the process connect
    // to every prefill process they receive from (every prefill rank is some
    // decode rank's source), and a second connection to the same process at
    // the same time can stall one of the two connects.
    peer.decider_reached = true;
    return;
  }
  reach_peers ask;
  for (auto& r : peer.everyone)
    if (r.control.published() && r.handle.node() != st.decider.node() &&
        !(local_decider && r.handle.node() == peer.bootstrap_node))
      ask.ranks.push_back(r);
  if (ask.ranks.empty()) {
    peer.decider_reached = true;
    return;
  }
  self->request(st.decider, request_timeout, std::move(ask))
      .then(guarded_callback(self,
                             [self, key, round](reach_peers&) {
                               auto p = self->state.peers.find(key);
                               if (p == self->state.peers.end() || p->second.round != round)
                                 return;
                               p->second.decider_reached = true;
                               maybe_ready(self, key);
                             }),
            guarded_callback(self, [self, key, round](caf::error& err) {
              auto p = self->state.peers.find(key);
              if (p == self->state.peers.end() || p->second.round != round)
                return;
              resolve_failed(
                  self, key,
                  "the decider could not reach the prefill ranks: " + self->system().render(err));
            }));
}

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
  auto& mine = st.cfg.pool.layout;
  if (auto seen = st.generations.note(whole); seen.replaced)
    log().warn("{} {}", who(self), incarnations::restarted(whole, seen.previous, me).cause);
  peer.instance = topo.instance;
  peer.everyone.clear();
  for (auto& r : topo.ranks)
    peer.everyone.push_back({r.rank, r.handle, r.control});
  instance_size psize{topo.tp_size, topo.pp_size};
  instance_size dsize{st.cfg.tp_size, st.cfg.pp_size};
  if (auto bad = check_sizes(psize, dsize)) {
    refuse(self, key, failure{errc::unsupported, *bad, me});
    return;
  }
  auto first = topo.ranks.front().layout;
  auto plan = sources_of(psize, dsize, me.tp, me.pp, first.mla, first.total_kv_heads);
  peer.sources.clear();
  peer.handles.clear();
  peer.accepted.clear();
  peer.decider_reached = false;
  auto round = ++peer.round;
  std::vector<const rank_registration*> regs;
  for (auto& s : plan) {
    auto reg = std::find_if(topo.ranks.begin(), topo.ranks.end(),
                            [&](auto& r) { return r.rank.tp == s.tp && r.rank.pp == s.pp; });
    if (reg == topo.ranks.end()) {
      resolve_failed(self, key,
                     "no prefill rank tp" + std::to_string(s.tp) + " pp" + std::to_string(s.pp) +
                         " in the topology");
      return;
    }
    if (auto bad = check_pairing(reg->layout, mine)) {
      refuse(self, key, failure{bad->code, bad->cause, me});
      return;
    }
    peer.sources.push_back(
        {reg->rank, s.dummy, s.writes_aux, reg->data_endpoint, reg->layout, false});
    peer.handles.emplace(reg->rank, reg->handle);
    regs.push_back(&*reg);
  }
  reach_from_decider(self, key, round);
  for (auto* reg : regs) {
    auto rank = reg->rank;
    auto handle = reg->handle;
    auto writer = reg->data_endpoint;
    // Its process first (a connection this rank opens), then the registration.
    reach_rank(self, peer, *reg, [self, key, round, rank, handle, writer](std::string error) {
      auto p = self->state.peers.find(key);
      if (p == self->state.peers.end() || p->second.round != round)
        return;
      if (!error.empty()) {
        resolve_failed(self, key, "connecting to " + to_string(rank) + ": " + error);
        return;
      }
      auto& st = self->state;
      auto timeout = p->second.phase == peer_t::stage::down ? st.cfg.limits.silence()
                                                            : caf::timespan{request_timeout};
      // The credential its transport proves to this rank's receiver: the
      // data plane admits no one the control plane did not introduce.
      dest_registration reg{st.cfg.self,          caf::actor_cast<decode_rank_actor>(self),
                            st.cfg.data_endpoint, st.cfg.pool.layout,
                            st.cfg.staging,       st.cfg.net->credential_for(writer)};
      self->request(handle, timeout, std::move(reg))
          .then(guarded_callback(self,
                                 [self, key, round, rank](dest_accepted& ok) {
                                   on_accepted(self, key, round, rank, ok.staged);
                                 }),
                guarded_callback(self, [self, key, round, rank](caf::error& err) {
                  auto p = self->state.peers.find(key);
                  if (p == self->state.peers.end() || p->second.round != round)
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
}

void start_resolve(self_ptr self, const std::string& key) {
  auto& peer = self->state.peers.at(key);
  // The handshake names this rank: wait for the decider to give it its
  // instance generation.
  if (peer.in_flight ||
      (peer.phase != peer_t::stage::resolving && peer.phase != peer_t::stage::down) ||
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

/// Every source delivered: the rank has finished its part if the aux row is
/// the room's; the decider gets the word either way.
void maybe_finish(self_ptr self, decode_room& room) {
  if (room.finished() || !room.all_sources_done())
    return;
  auto& st = self->state;
  if (room.aux_slot() != no_aux_slot) {
    auto stamp = read_stamp(st.cfg.pool, room.aux_slot());
    if (stamp != room.key()) {
      report(self, room,
             failure{errc::aux_mismatch,
                     "aux row " + std::to_string(room.aux_slot()) + " carries " + to_string(stamp) +
                         ", expected " + to_string(room.key()),
                     st.cfg.self});
      return;
    }
  }
  room.mark_finished();
  self->send(st.decider, room_finished{room.key(), st.cfg.self});
  st.finish_told[room.key().room] = self->clock().now();
  // Other participants may still be writing: wait as long as a transfer may take.
  room.fsm().await_verdict(st.cfg.limits.transferring + st.cfg.limits.verdict, true);
  sync(self, room);
}

/// A chunk's bytes are in the room's pages (written there, or scattered).
void on_landed(self_ptr self, decode_room& room, const chunk_landed& msg) {
  if (auto bad = room.landed(msg)) {
    report(self, room, std::move(*bad));
    return;
  }
  maybe_finish(self, room);
  sync(self, room);
}

decode_room* find(self_ptr self, const room_key& key) {
  auto i = self->state.rooms.find(key.room);
  if (i == self->state.rooms.end() || i->second.key().generation != key.generation)
    return nullptr;
  return &i->second;
}

/// Whether `rank` is one of the ranks of `peer`'s instance.
bool serves(const decode_rank_state::prefill_peer& peer, const rank_ref& rank) {
  return peer.handles.count(rank) > 0 ||
         std::any_of(peer.everyone.begin(), peer.everyone.end(),
                     [&](const participant& p) { return p.rank == rank; });
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

/// A prefill rank went down: its down_msg here, its bootstrap's rank_left
/// (`departure`: the instance is dead until the rank registers again), or a
/// verdict that names it lost. Its instance is down: the live rooms bound to
/// it fail (lost by its link, `link`, it may live on cut off and conclude on
/// its own: the cause both sides of a cut word alike), and new rooms fail at
/// once until a probe finds the instance whole.
void lose_source(self_ptr self, const rank_ref& gone, const std::string& reason, bool link,
                 spdlog::level::level_enum level, const rank_left* departure = nullptr) {
  auto& st = self->state;
  log().log(level, "{} prefill {} went down: {}", who(self), to_string(gone), reason);
  failure went{errc::peer_down, "prefill " + to_string(gone) + " went down (" + reason + ")",
               st.cfg.self};
  auto why = link ? decider_lost(decider_ref(st.cfg.self.instance)) : went;
  auto cause = departure ? instance_dead(gone.instance, gone.instance_generation, *departure)
                         : failure{errc::peer_down, went.cause, gone};
  for (auto p = st.peers.begin(); p != st.peers.end(); ++p)
    if (serves(p->second, gone)) {
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
    auto& me = st.cfg.self;
    auto why = decider_lost(decider_ref(me.instance));
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
    if (serves(p->second, why.origin)) {
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
  auto& bound = room.sources().front().rank;
  auto same = std::any_of(p->second.sources.begin(), p->second.sources.end(),
                          [&](const room_source& s) { return s.rank == bound; });
  if (!same)
    return;
  log().info(
      "{} {}: contact with the prefill instance at {} may be lost: it is looked up again "
      "for the next rooms",
      who(self), to_string(room.key()), p->first);
  drop_peer(self, p, why);
}

/// An exception escaped a handler: every live room of this rank fails with it.
failure on_exception(self_ptr self, const std::string& what) {
  return fail_live_rooms(self, what,
                         [](self_ptr s, auto& room, const failure& why) { report(s, room, why); });
}

}  // namespace

decode_rank_actor::behavior_type decode_rank(
    decode_rank_actor::stateful_pointer<decode_rank_state> self, decode_rank_config cfg) {
  self->state.cfg = std::move(cfg);
  self->set_down_handler(guarded_callback(self, [self](caf::down_msg& dm) { on_down(self, dm); }));
  register_with_decider(self);
  return guarded<decode_rank_actor::behavior_type>(
      [self](const std::string& what) { return on_exception(self, what); },
      // -- scheduler ------------------------------------------------------------
      [self](room_open_atom, uint64_t id, bootstrap_locator& where, room_slot_ptr& slot) {
        if (!from_this_process(self, who(self), "room_open"))
          return;
        auto& st = self->state;
        if (refuse_reopen(st.rooms, id, slot, st.cfg.self))
          return;
        auto key = where.key();
        auto& room = st.rooms
                         .try_emplace(id, id, std::move(slot), key, st.cfg.self, st.cfg.pool.layout,
                                      st.cfg.limits)
                         .first->second;
        auto [p, fresh] = st.peers.try_emplace(key);
        if (fresh)
          p->second.where = where;
        join(self, room);
        switch (p->second.phase) {
          case peer_t::stage::ready:
            advance(self, room);
            break;
          case peer_t::stage::refused:
            report(self, room, p->second.refusal);
            break;
          case peer_t::stage::down:
            fail_fast(self, room, p->second);
            break;
          case peer_t::stage::resolving:
            start_resolve(self, key);
            break;
        }
        sync(self, room);
      },
      [self](receiver_init& msg) -> caf::result<void> {
        if (!from_this_process(self, who(self), "receiver_init"))
          return caf::make_error(caf::sec::unexpected_message);
        auto i = self->state.rooms.find(msg.room);
        if (i == self->state.rooms.end())
          return unknown_room(self->state.cfg.self, msg.room);
        auto& room = i->second;
        if (auto bad = room.init(std::move(msg.dst_pages), msg.aux_slot, std::move(msg.states))) {
          report(self, room, std::move(*bad));
          return caf::unit;
        }
        // Cleared before any write can come: a stale row never passes the check.
        if (room.aux_slot() != no_aux_slot)
          write_stamp(self->state.cfg.pool, room.aux_slot(), room_key{});
        advance(self, room);
        sync(self, room);
        return caf::unit;
      },
      [self](room_abort_atom, uint64_t id) -> caf::result<void> {
        if (!from_this_process(self, who(self), "room_abort"))
          return caf::make_error(caf::sec::unexpected_message);
        auto i = self->state.rooms.find(id);
        if (i == self->state.rooms.end())
          return unknown_room(self->state.cfg.self, id);
        report(self, i->second,
               failure{errc::aborted, "aborted by the decode scheduler", self->state.cfg.self});
        return caf::unit;
      },
      [self](room_clear_atom, uint64_t id) -> caf::result<void> {
        if (!from_this_process(self, who(self), "room_clear"))
          return caf::make_error(caf::sec::unexpected_message);
        auto& st = self->state;
        auto i = st.rooms.find(id);
        if (i == st.rooms.end())
          return unknown_room(self->state.cfg.self, id);
        auto& room = i->second;
        if (!room.fsm().terminal())
          report(self, room,
                 failure{errc::aborted,
                         "cleared by the decode scheduler in " + to_string(room.fsm().state()),
                         st.cfg.self});
        if (st.registered)
          self->send(st.decider, room_leave{room.key(), st.cfg.self});
        // Cleared before its verdict: nothing more may land in its pages.
        if (!room.fsm().terminal() || !room.slot() || !room.slot()->released())
          if (!st.draining.count(room.key().generation))
            release(self, room);
        st.rooms.erase(i);
        st.finish_told.erase(id);
        return caf::unit;
      },
      [self](room_poll_atom, uint64_t id) -> caf::result<room_status> {
        if (!from_this_process(self, who(self), "room_poll"))
          return caf::make_error(caf::sec::unexpected_message);
        auto i = self->state.rooms.find(id);
        if (i == self->state.rooms.end())
          return unknown_room(self->state.cfg.self, id);
        return status_of(i->second);
      },
      // -- prefill ranks --------------------------------------------------------
      [self](chunk_landed& msg) {
        if (auto old = self->state.generations.stale(msg.prefill_rank, self->state.cfg.self)) {
          log().warn("{} ignored chunk {} of {}: {}", who(self), msg.chunk, to_string(msg.key),
                     old->cause);
          return;
        }
        auto* room = find(self, msg.key);
        if (!room || room->fsm().terminal() || room->fsm().awaiting_verdict())
          return;  // stale (another generation), decided, or already reported
        // (A chunk with no pages carries states and the aux row only: never staged.)
        if (msg.pages > 0 && msg.staged != room->staged_from(msg.prefill_rank)) {
          report(self, *room,
                 failure{errc::invalid_chunk,
                         "chunk " + std::to_string(msg.chunk) + " of " + to_string(msg.key) +
                             " from " + to_string(msg.prefill_rank) +
                             (msg.staged ? " came staged, but this source does not stage"
                                         : " came unstaged, but this source stages"),
                         self->state.cfg.self});
          return;
        }
        if (msg.staged) {
          // Counts as landed once scattered into the room's pages.
          self->send(self->state.cfg.staging.handle, msg);
          room->fsm().touch();
          return;
        }
        on_landed(self, *room, msg);
      },
      [self](chunk_scattered& msg) {
        auto* room = find(self, msg.landed.key);
        if (!room || room->fsm().terminal() || room->fsm().awaiting_verdict())
          return;
        if (msg.why) {
          report(self, *room, std::move(msg.why));
          return;
        }
        on_landed(self, *room, msg.landed);
      },
      [self](rank_left& msg) {
        lose_source(self, msg.rank, msg.reason, msg.link_lost,
                    msg.orderly ? spdlog::level::info : spdlog::level::warn, &msg);
      },
      [self](topology& topo) {
        // The bootstrap of an instance this rank looked up: whole again.
        if (!topo.complete() || topo.dead())
          return;
        for (auto& [key, peer] : self->state.peers)
          if (peer.instance == topo.instance && peer.phase == peer_t::stage::down) {
            peer.in_flight = true;
            on_topology(self, key, std::move(topo));
            return;
          }
      },
      // -- the decider ----------------------------------------------------------
      [self](room_keyed& msg) {
        auto i = self->state.rooms.find(msg.key.room);
        if (i == self->state.rooms.end())
          return;
        i->second.key_received();
        i->second.set_generation(msg.key.generation);
        heard_from_sender(self);
        advance(self, i->second);
        sync(self, i->second);
      },
      [self](room_verdict& msg) {
        if (!from(self, self->state.decider.address(), who(self), "a verdict"))
          return;
        heard_from_sender(self);
        auto i = self->state.rooms.find(msg.key.room);
        if (i == self->state.rooms.end())
          return;
        auto& room = i->second;
        // Only for the room's own key: the decider keys a join before any
        // verdict of it, so a verdict for a room not keyed yet is of an older
        // generation of its id (sent again), and must not become its key.
        if (room.keyed() && room.key() == msg.key) {
          settle(self, room, msg.outcome, msg.why);
          forget_lost_source(self, msg.why);
          forget_cut_off_source(self, room, msg.why);
        }
      },
      [self](heartbeat_atom, uint64_t seq) -> caf::result<heartbeat_atom, uint64_t> {
        heard_from_sender(self);
        auto& st = self->state;
        remind_finished(
            self, st.rooms, st.finish_told,
            [&st](const decode_room&) { return st.decider.address(); },
            [self](const decode_room& room) {
              auto& st = self->state;
              self->send(st.decider, room_finished{room.key(), st.cfg.self});
            });
        return {heartbeat_atom_v, seq};
      },
      // -- timers ---------------------------------------------------------------
      [self](beat_atom) {
        check_deciders(
            self, self->state.rooms,
            [self](const decode_room& room) {
              return room.joined() ? self->state.decider.address() : caf::actor_addr{};
            },
            [self](decode_room& room, const failure& why) {
              settle(self, room, kv_poll::failed, why);
              // If it was only cut off, it hears this first when it is back.
              self->send(self->state.decider, room_failure{room.key(), why});
            });
      },
      [self](deadline_atom, uint64_t id, uint64_t epoch) {
        auto& st = self->state;
        auto i = st.rooms.find(id);
        if (i == st.rooms.end() || !i->second.fsm().is_current(epoch))
          return;
        auto& room = i->second;
        if (room.fsm().awaiting_verdict()) {
          auto why = room.finished()
                         ? failure{errc::peer_down, room.fsm().stuck_cause(room.key()), st.cfg.self}
                         : room.reported();
          log().warn("{} {}", who(self), room.fsm().stuck_cause(room.key()));
          // A decider still heard from is late, not gone: it hears why and
          // decides for everyone. Only a silent one is left behind.
          if (st.registered && decider_alive(self, st.decider.address()) &&
              room.fsm().wait_longer() <= max_verdict_extensions) {
            self->send(st.decider, room_failure{room.key(), why});
            sync(self, room);
            return;
          }
          // A silent decider: the words every rank uses for it.
          if (st.registered && !decider_alive(self, st.decider.address()))
            why = decider_lost(decider_ref(st.cfg.self.instance));
          settle(self, room, kv_poll::failed, why);
          return;
        }
        if (!st.registered) {
          // The decider never answered this rank: the room concludes here
          // with the words every rank uses for a silent decider.
          log().warn("{} {}, and the decider of {} never answered", who(self),
                     room.fsm().stuck_cause(room.key()), st.cfg.self.instance);
          auto why = decider_lost(decider_ref(st.cfg.self.instance));
          settle(self, room, kv_poll::failed, why);
          if (st.decider)
            self->send(st.decider, room_failure{room.key(), why});
          return;
        }
        failure why{errc::deadline, room.fsm().stuck_cause(room.key()), st.cfg.self};
        if (auto p = st.peers.find(room.peer()); p != st.peers.end() &&
                                                 p->second.phase == peer_t::stage::resolving &&
                                                 !p->second.last_error.empty()) {
          why.code = errc::bootstrap_unreachable;
          why.cause += " (prefill instance at " + room.peer() + ": " + p->second.last_error + ")";
        }
        report(self, room, std::move(why));
      },
      [self](retry_atom, std::string& key) {
        auto p = self->state.peers.find(key);
        if (p == self->state.peers.end())
          return;
        p->second.probe_armed = false;
        start_resolve(self, key);
      },
      [self](register_atom) {
        if (!self->state.registered)
          register_with_decider(self);
      },
      [self](quiesce_atom) {
        auto& st = self->state;
        st.quiesce_armed = false;
        auto now = self->clock().now();
        for (auto i = st.draining.begin(); i != st.draining.end();) {
          auto& d = i->second;
          if (st.cfg.net->close_fence(i->first)) {
            release_quiet(self, d.slot, d.key, d.staged);
            i = st.draining.erase(i);
            continue;
          }
          // A writer stuck half way through a batch (frozen, partitioned):
          // cut it off, so that its batch stops where it is.
          if (!d.cut && now - d.since >= st.cfg.limits.verdict) {
            for (auto& w : d.writers)
              st.cfg.net->disconnect(w);
            d.cut = true;
          }
          ++i;
        }
        arm_quiesce(self);
      });
}

}  // namespace kvferry
