#include "actors/rank/decode_rank.hpp"

#include <algorithm>
#include <chrono>

#include <caf/actor_cast.hpp>

#include "actors/bootstrap/bootstrap_client.hpp"
#include "actors/log.hpp"
#include "actors/rank/room_publish.hpp"
#include "messages/room.hpp"
#include "messages/scheduler.hpp"

namespace kvferry {

namespace {

using self_ptr = decode_rank_actor::stateful_pointer<decode_rank_state>;
using peer_t = decode_rank_state::prefill_peer;

constexpr auto request_timeout = std::chrono::seconds{5};
constexpr auto retry_base = std::chrono::milliseconds{50};
constexpr auto retry_max = std::chrono::seconds{1};

std::string who(self_ptr self) {
  return "[" + to_string(self->state.cfg.self) + "]";
}

void sync(self_ptr self, decode_room& room) {
  publish(self, room.slot(), room.key(), room.fsm());
}

/// Sends a decided room's verdict to its prefill ranks, once they are known.
void send_verdict(self_ptr self, decode_room& room) {
  auto p = self->state.peers.find(room.peer());
  if (room.verdict_sent() || !room.decision().decided() || p == self->state.peers.end() ||
      p->second.handles.empty())
    return;
  auto& v = *room.decision().outcome();
  room_verdict msg{room.key(), v.outcome, v.why};
  for (auto& [rank, handle] : p->second.handles)
    if (room.sources().empty() ||
        std::find(room.sources().begin(), room.sources().end(), rank) != room.sources().end())
      self->send(handle, msg);
  room.mark_verdict_sent();
}

/// Applies a verdict this rank, the room's decider, just reached, and sends it
/// to every prefill rank of the room.
void apply(self_ptr self, decode_room& room, const std::optional<verdict>& v) {
  if (!v)
    return;
  auto& fsm = room.fsm();
  if (v->outcome == kv_poll::success) {
    fsm.succeed();
    log().debug("{} {}: Success", who(self), to_string(room.key()));
  } else {
    fsm.fail(v->why);
    log().info("{} {}: Failed: {}", who(self), to_string(room.key()), to_string(v->why));
  }
  sync(self, room);
  send_verdict(self, room);
}

void fail_room(self_ptr self, decode_room& room, failure why) {
  apply(self, room, room.decision().fail(std::move(why)));
}

void send_request(self_ptr self, decode_room& room) {
  auto& st = self->state;
  auto& peer = st.peers.at(room.peer());
  for (auto& src : room.sources())
    self->send(peer.handles.at(src),
               room_request{room.key(), st.cfg.self, caf::actor_cast<decode_rank_actor>(self),
                            room.dst_pages(), room.aux_slot()});
  room.mark_requested();
}

/// The peer is ready: the room learns its sources and may send its request.
void attach(self_ptr self, decode_room& room, const peer_t& peer) {
  room.set_sources(peer.sources);
  room.fsm().advance(kv_poll::waiting_for_input);
  if (room.initialized() && !room.requested())
    send_request(self, room);
  sync(self, room);
}

template <class F>
void for_rooms_of(self_ptr self, const std::string& key, F f) {
  for (auto& [id, room] : self->state.rooms)
    if (room.peer() == key && !room.fsm().terminal())
      f(room);
}

void refuse(self_ptr self, const std::string& key, failure why) {
  auto& peer = self->state.peers.at(key);
  peer.phase = peer_t::stage::refused;
  peer.refusal = why;
  peer.in_flight = false;
  log().error("{} prefill instance at {} refused: {}", who(self), key, to_string(why));
  for_rooms_of(self, key, [&](decode_room& room) { fail_room(self, room, why); });
  for (auto& [id, room] : self->state.rooms)
    if (room.peer() == key)
      send_verdict(self, room);
}

void start_resolve(self_ptr self, const std::string& key);

void resolve_failed(self_ptr self, const std::string& key, std::string error) {
  auto p = self->state.peers.find(key);
  if (p == self->state.peers.end())
    return;
  auto& peer = p->second;
  peer.in_flight = false;
  peer.last_error = std::move(error);
  ++peer.attempts;
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

void on_accepted(self_ptr self, const std::string& key, const rank_ref& src) {
  auto p = self->state.peers.find(key);
  if (p == self->state.peers.end() || p->second.phase != peer_t::stage::resolving)
    return;
  auto& peer = p->second;
  peer.accepted.insert(src);
  if (peer.accepted.size() < peer.sources.size())
    return;
  peer.phase = peer_t::stage::ready;
  peer.in_flight = false;
  peer.attempts = 0;
  for (auto& [rank, handle] : peer.handles)
    self->monitor(handle);
  log().info("{} handshake with prefill instance at {} done ({} source rank{})", who(self), key,
             peer.sources.size(), peer.sources.size() == 1 ? "" : "s");
  for_rooms_of(self, key, [&](decode_room& room) { attach(self, room, peer); });
  // Rooms that failed here before the sources were known tell them now.
  for (auto& [id, room] : self->state.rooms)
    if (room.peer() == key)
      send_verdict(self, room);
}

void on_topology(self_ptr self, const std::string& key, topology topo) {
  auto& st = self->state;
  auto p = st.peers.find(key);
  if (p == st.peers.end())
    return;
  auto& peer = p->second;
  if (!topo.complete()) {
    resolve_failed(self, key,
                   "prefill instance " + topo.instance + " has " +
                       std::to_string(topo.ranks.size()) + " of " +
                       std::to_string(size_t{topo.tp_size} * topo.pp_size) + " ranks registered");
    return;
  }
  auto& me = st.cfg.self;
  if (topo.tp_size != st.cfg.tp_size || topo.pp_size != st.cfg.pp_size) {
    refuse(self, key,
           failure{errc::unsupported,
                   "prefill TP " + std::to_string(topo.tp_size) + " x PP " +
                       std::to_string(topo.pp_size) + " with decode TP " +
                       std::to_string(st.cfg.tp_size) + " x PP " + std::to_string(st.cfg.pp_size) +
                       ": this build pairs equal TP and PP sizes only",
                   me});
    return;
  }
  auto src = std::find_if(topo.ranks.begin(), topo.ranks.end(), [&](const rank_registration& r) {
    return r.rank.tp == me.tp && r.rank.pp == me.pp;
  });
  if (src == topo.ranks.end()) {
    resolve_failed(self, key,
                   "no prefill rank tp" + std::to_string(me.tp) + " pp" + std::to_string(me.pp) +
                       " in the topology");
    return;
  }
  peer.sources = {src->rank};
  peer.handles = {{src->rank, src->handle}};
  peer.accepted.clear();
  if (auto m = compare(src->layout, st.cfg.pool.layout)) {
    refuse(self, key, failure{errc::layout_mismatch, "layout mismatch: " + *m, me});
    return;
  }
  dest_registration reg{me, caf::actor_cast<decode_rank_actor>(self), st.cfg.data_endpoint,
                        st.cfg.pool.layout};
  auto src_rank = src->rank;
  self->request(src->handle, request_timeout, std::move(reg))
      .then([self, key, src_rank](dest_accepted&) { on_accepted(self, key, src_rank); },
            [self, key, src_rank](caf::error& err) {
              auto why = to_failure(err, self->state.cfg.self);
              if (why.code == errc::layout_mismatch || why.code == errc::unsupported) {
                why.origin = src_rank;
                refuse(self, key, std::move(why));
              } else {
                resolve_failed(
                    self, key,
                    "registration with " + to_string(src_rank) + ": " + self->system().render(err));
              }
            });
}

void start_resolve(self_ptr self, const std::string& key) {
  auto& peer = self->state.peers.at(key);
  if (peer.in_flight || peer.phase != peer_t::stage::resolving)
    return;
  peer.in_flight = true;
  resolve_bootstrap(
      self, peer.where, request_timeout, [self, key](caf::expected<bootstrap_actor> found) {
        if (!found) {
          resolve_failed(self, key, self->system().render(found.error()));
          return;
        }
        self->request(*found, request_timeout, topology_atom_v)
            .then([self, key](topology& topo) { on_topology(self, key, std::move(topo)); },
                  [self, key](caf::error& err) {
                    resolve_failed(self, key, "topology query: " + self->system().render(err));
                  });
      });
}

/// Finishes the room if every source delivered and the aux row is the room's.
void maybe_finish(self_ptr self, decode_room& room) {
  if (!room.all_sources_done())
    return;
  auto& st = self->state;
  if (room.aux_slot() != no_aux_slot) {
    auto stamp = read_stamp(st.cfg.pool, room.aux_slot());
    if (stamp != room.key()) {
      fail_room(self, room,
                failure{errc::aux_mismatch,
                        "aux row " + std::to_string(room.aux_slot()) + " carries " +
                            to_string(stamp) + ", expected " + to_string(room.key()),
                        st.cfg.self});
      return;
    }
  }
  apply(self, room, room.decision().finish(st.cfg.self));
}

caf::error unknown_room(self_ptr self, uint64_t id) {
  return make_error(errc::unknown_room, "room " + std::to_string(id) + " is not open on " +
                                            to_string(self->state.cfg.self));
}

decode_room* find(self_ptr self, const room_key& key) {
  auto i = self->state.rooms.find(key.room);
  if (i == self->state.rooms.end() || i->second.key().generation != key.generation)
    return nullptr;
  return &i->second;
}

}  // namespace

decode_rank_actor::behavior_type decode_rank(
    decode_rank_actor::stateful_pointer<decode_rank_state> self, decode_rank_config cfg) {
  self->state.cfg = std::move(cfg);
  self->state.next_generation = self->state.cfg.first_generation;
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    for (auto p = st.peers.begin(); p != st.peers.end();) {
      auto hit = std::find_if(p->second.handles.begin(), p->second.handles.end(),
                              [&](auto& kv) { return kv.second.address() == dm.source; });
      if (hit == p->second.handles.end()) {
        ++p;
        continue;
      }
      auto gone = hit->first;
      log().log(
          dm.reason == caf::exit_reason::user_shutdown ? spdlog::level::info : spdlog::level::warn,
          "{} prefill {} went down: {}", who(self), to_string(gone), caf::to_string(dm.reason));
      failure why{errc::peer_down,
                  "prefill " + to_string(gone) + " went down (" + caf::to_string(dm.reason) + ")",
                  st.cfg.self};
      for_rooms_of(self, p->first, [&](decode_room& room) { fail_room(self, room, why); });
      // Later rooms look the instance up again (it may have restarted).
      p = st.peers.erase(p);
    }
  });
  return {
      // -- scheduler ------------------------------------------------------------
      [self](room_open_atom, uint64_t id, bootstrap_locator& where, room_slot_ptr& slot) {
        auto& st = self->state;
        if (st.rooms.count(id)) {
          if (slot)
            slot->fail(room_key{id, 0},
                       failure{errc::duplicate_room,
                               "room " + std::to_string(id) + " is already open on this rank",
                               st.cfg.self});
          return;
        }
        auto key = where.key();
        room_key rk{id, st.next_generation++};
        auto& room = st.rooms
                         .try_emplace(id, rk, std::move(slot), key, st.cfg.self, st.cfg.pool.layout,
                                      st.cfg.limits)
                         .first->second;
        auto [p, fresh] = st.peers.try_emplace(key);
        if (fresh)
          p->second.where = where;
        auto& peer = p->second;
        switch (peer.phase) {
          case peer_t::stage::ready:
            attach(self, room, peer);
            return;
          case peer_t::stage::refused:
            fail_room(self, room, peer.refusal);
            return;
          case peer_t::stage::resolving:
            sync(self, room);
            start_resolve(self, key);
            return;
        }
      },
      [self](receiver_init& msg) -> caf::result<void> {
        auto i = self->state.rooms.find(msg.room);
        if (i == self->state.rooms.end())
          return unknown_room(self, msg.room);
        auto& room = i->second;
        if (auto bad = room.init(std::move(msg.dst_pages), msg.aux_slot)) {
          fail_room(self, room, std::move(*bad));
          return caf::unit;
        }
        // Cleared before any write can come: a stale row never passes the check.
        if (room.aux_slot() != no_aux_slot)
          write_stamp(self->state.cfg.pool, room.aux_slot(), room_key{});
        if (room.has_sources() && !room.fsm().terminal() && !room.requested())
          send_request(self, room);
        sync(self, room);
        return caf::unit;
      },
      [self](room_abort_atom, uint64_t id) -> caf::result<void> {
        auto i = self->state.rooms.find(id);
        if (i == self->state.rooms.end())
          return unknown_room(self, id);
        fail_room(self, i->second,
                  failure{errc::aborted, "aborted by the decode scheduler", self->state.cfg.self});
        return caf::unit;
      },
      [self](room_clear_atom, uint64_t id) -> caf::result<void> {
        auto i = self->state.rooms.find(id);
        if (i == self->state.rooms.end())
          return unknown_room(self, id);
        auto& room = i->second;
        if (!room.fsm().terminal())
          fail_room(self, room,
                    failure{errc::aborted,
                            "cleared by the decode scheduler in " + to_string(room.fsm().state()),
                            self->state.cfg.self});
        self->state.rooms.erase(i);
        return caf::unit;
      },
      [self](room_poll_atom, uint64_t id) -> caf::result<room_status> {
        auto i = self->state.rooms.find(id);
        if (i == self->state.rooms.end())
          return unknown_room(self, id);
        auto& fsm = i->second.fsm();
        return room_status{i->second.key(), fsm.state(), fsm.why()};
      },
      // -- prefill ranks --------------------------------------------------------
      [self](chunk_landed& msg) {
        auto* room = find(self, msg.key);
        if (!room || room->fsm().terminal())
          return;  // stale (another generation), or already decided
        if (auto bad = room->landed(msg)) {
          fail_room(self, *room, std::move(*bad));
          return;
        }
        if (msg.last)
          room->decision().finish(msg.prefill_rank);
        maybe_finish(self, *room);
        sync(self, *room);
      },
      [self](room_failure& msg) {
        if (auto* room = find(self, msg.key))
          fail_room(self, *room, std::move(msg.why));
      },
      [self](room_verdict& msg) {
        // A prefill rank that concluded alone (before this room's request
        // reached it) tells its outcome; it can only be a failure.
        if (auto* room = find(self, msg.key); room && msg.outcome == kv_poll::failed)
          fail_room(self, *room, std::move(msg.why));
      },
      // -- timers ---------------------------------------------------------------
      [self](deadline_atom, uint64_t id, uint64_t epoch) {
        auto& st = self->state;
        auto i = st.rooms.find(id);
        if (i == st.rooms.end() || !i->second.fsm().is_current(epoch))
          return;
        auto& room = i->second;
        failure why{errc::deadline, room.fsm().stuck_cause(room.key()), st.cfg.self};
        if (auto p = st.peers.find(room.peer()); p != st.peers.end() &&
                                                 p->second.phase == peer_t::stage::resolving &&
                                                 !p->second.last_error.empty()) {
          why.code = errc::bootstrap_unreachable;
          why.cause += " (prefill instance at " + room.peer() + ": " + p->second.last_error + ")";
        }
        fail_room(self, room, std::move(why));
      },
      [self](retry_atom, std::string& key) {
        if (self->state.peers.count(key))
          start_resolve(self, key);
      },
  };
}

}  // namespace kvferry
