// The prefill rank's peers: decode ranks' registrations, their requests and
// verdicts (now, before the room opens, after it was cleared), losing decode
// ranks and deciders, and this instance's bootstrap. The backlog of early
// arrivals is plain logic (early_arrivals); this file sends and arms timers.
#include <algorithm>
#include <chrono>

#include <caf/actor_cast.hpp>

#include "actors/base/log.hpp"
#include "actors/common/deadline_timer.hpp"
#include "actors/gateway/remote_lookup.hpp"
#include "actors/plan/kv_digest.hpp"
#include "actors/plan/staging_plan.hpp"
#include "actors/plan/tp_mapping.hpp"
#include "actors/rank/decider_side.hpp"
#include "actors/rank/prefill_rank_steps.hpp"
#include "actors/rank/rank_guard.hpp"
#include "actors/rank/request_outcome.hpp"
#include "actors/rank/room_steps.hpp"
#include "messages/scheduler.hpp"
#include "messages/transfer.hpp"

namespace kvferry::prefill_steps {

namespace {

constexpr auto request_timeout = std::chrono::seconds{5};
constexpr auto register_retry = std::chrono::seconds{1};

/// Room `id`'s decider is `decider`; a decider is monitored once, not per room.
void note_decider(self_ptr self, uint64_t id, const decider_actor& decider) {
  auto& st = self->state;
  st.deciders.insert_or_assign(id, decider);
  if (st.deciders_monitored.insert(decider.address()).second)
    self->monitor(decider);
}

/// A request for open room `room`: judged as a value (request_outcome.hpp),
/// then done.
void handle_request(self_ptr self, prefill_room& room, const room_request& req) {
  auto& st = self->state;
  request_facts facts{
      room.key(),       room.fsm().state(),
      room.fsm().why(), room.key().generation == 0 ? st.early.cleared_as(req.key) : nullptr,
      st.instance_down, st.peers.count(req.decode_rank) > 0,
      st.cfg.self};
  auto out = judge_request(facts, req);
  using action = request_outcome::action;
  if (out.what == action::ignore)
    return;
  if (out.what == action::tell_decider) {
    self->send(req.decider, room_failure{req.key, out.why});
    return;
  }
  if (!st.deciders.count(room.id())) {
    note_decider(self, room.id(), req.decider);
    watch_decider(self, req.decider, decider_ref(req.decode_rank.instance));
  }
  room.adopt(req.key.generation);
  if (out.what == action::report) {
    report(self, room, out.why);
    return;
  }
  auto peer = st.peers.find(req.decode_rank);
  auto& dl = peer->second.layout;
  auto& me = st.cfg.self;
  auto required = destinations_of({st.cfg.tp_size, st.cfg.pp_size}, {dl.tp_size, dl.pp_size}, me.tp,
                                  me.pp, st.cfg.layout.mla, st.cfg.layout.total_kv_heads);
  if (auto bad = room.bind(req, dl, required)) {
    report(self, room, std::move(*bad));
    return;
  }
  if (room.bound()) {
    room.fsm().advance(kv_poll::waiting_for_input);
    log().debug("{} {}: every destination known, WaitingForInput", who(self),
                to_string(room.key()));
  }
  dispatch(self, room);
}

/// Keeps a request for a room the scheduler has not opened (yet).
void keep_for_open(self_ptr self, const room_request& req) {
  auto& st = self->state;
  switch (st.early.keep_request(req)) {
    case early_arrivals::kept::full:
      self->send(req.decider,
                 room_failure{req.key, failure{errc::invalid_argument,
                                               std::to_string(st.early.max_waiting()) +
                                                   " requests already wait for rooms this rank "
                                                   "has not opened",
                                               st.cfg.self}});
      return;
    case early_arrivals::kept::crowded:
      self->send(req.decider,
                 room_failure{req.key, failure{errc::invalid_argument,
                                               std::to_string(st.early.max_requests_per_room()) +
                                                   " decode ranks' requests already wait for " +
                                                   to_string(req.key) + " on this rank",
                                               st.cfg.self}});
      return;
    case early_arrivals::kept::decided:
      return;
    case early_arrivals::kept::first:
      arm_expiry(self, req.key.room, req.key.generation);
      [[fallthrough]];
    case early_arrivals::kept::another:
      if (st.cfg.board)
        st.cfg.board->add_requested(req.key.room);
      return;
  }
}

/// A decode instance came back with a newer generation: the rooms bound to
/// its older one fail, and its older ranks are forgotten.
void forget_incarnation(self_ptr self, const rank_ref& newer, uint64_t previous) {
  auto& st = self->state;
  auto why = incarnations::restarted(newer, previous, st.cfg.self);
  log().warn("{} {}", who(self), why.cause);
  for (auto& [id, room] : st.rooms)
    for (auto& d : room.destinations())
      if (d.decode_rank.instance == newer.instance &&
          d.decode_rank.instance_generation != newer.instance_generation) {
        report(self, room, why);
        break;
      }
  std::erase_if(st.peers, [&](const auto& kv) {
    return kv.first.instance == newer.instance &&
           kv.first.instance_generation != newer.instance_generation;
  });
}

}  // namespace

/// The room opened: the requests and verdict that came first take effect.
void open_waited(self_ptr self, prefill_room& room, early_arrivals::waiting entry) {
  auto& st = self->state;
  if (st.cfg.board)
    st.cfg.board->remove_requested(room.id());
  if (entry.verdict) {
    if (entry.request.decider)
      note_decider(self, room.id(), entry.request.decider);
    room.adopt(entry.verdict->key.generation);
    settle(self, room, entry.verdict->outcome, entry.verdict->why);
    return;
  }
  for (auto& req : entry.requests)
    handle_request(self, room, req);
}

/// The time of a room requested but not opened ran out.
void expire_waiting(self_ptr self, uint64_t id, uint64_t generation) {
  auto& st = self->state;
  auto gone = st.early.expire(id, generation, st.cfg.limits.bootstrapping, st.cfg.self);
  if (!gone)
    return;
  if (st.cfg.board)
    st.cfg.board->remove_requested(id);  // no longer offered to the scheduler
  if (!gone->failed)
    return;
  self->send(gone->request.decider, room_failure{gone->request.key, gone->verdict.why});
  // Kept a while, so that a late open concludes with the same cause.
  arm_expiry(self, id, generation);
}

void arm_expiry(self_ptr self, uint64_t id, uint64_t generation) {
  auto& st = self->state;
  set_timer(self,
            st.early.arm_expiry(id, generation, self->clock().now() + st.cfg.limits.bootstrapping),
            expire_atom_v);
}

void expiries_due(self_ptr self) {
  auto fired = self->state.early.expiries_due(self->clock().now());
  set_timer(self, fired.set_timer, expire_atom_v);
  for (auto& d : fired.due_now)
    expire_waiting(self, d.room, d.tag);
}

/// Registers this rank with its instance's bootstrap (found first where only
/// its address is known), again a second later while it cannot.
void register_with_bootstrap(self_ptr self) {
  auto& loc = self->state.cfg.bootstrap;
  resolve_published<bootstrap_actor>(
      self, loc.handle, loc.host, loc.port, request_timeout, "bootstrap",
      guard(self, on_exception, [self](caf::expected<bootstrap_actor> found) {
        auto& st = self->state;
        if (!found) {
          log().warn("{} cannot reach bootstrap {}: {}; retrying", who(self),
                     st.cfg.bootstrap.key(), self->system().render(found.error()));
          self->delayed_send(self, register_retry, register_atom_v);
          return;
        }
        st.bootstrap = *found;
        rank_registration reg{st.cfg.self,          caf::actor_cast<prefill_rank_actor>(self),
                              st.cfg.data_endpoint, st.cfg.layout,
                              st.cfg.tp_size,       st.cfg.pp_size,
                              st.cfg.control,       st.cfg.rank_generation,
                              st.cfg.life};
        self->request(st.bootstrap, request_timeout, std::move(reg))
            .then(guard(self, on_exception,
                        [self](registration_ack& ack) {
                          auto& st = self->state;
                          st.registered = true;
                          st.cfg.self.instance = ack.instance;
                          st.cfg.self.instance_generation = ack.instance_generation;
                          log().info("{} registered with bootstrap {}", who(self),
                                     st.cfg.bootstrap.key());
                        }),
                  guard(self, on_exception, [self](caf::error& err) {
                    log().error("{} registration refused by bootstrap {}: {}; retrying", who(self),
                                self->state.cfg.bootstrap.key(), self->system().render(err));
                    self->delayed_send(self, register_retry, register_atom_v);
                  }));
      }));
}

void on_down(self_ptr self, const caf::down_msg& dm) {
  auto& st = self->state;
  auto level =
      dm.reason == caf::exit_reason::user_shutdown ? spdlog::level::info : spdlog::level::warn;
  // A decider that goes down takes its rooms' verdicts with it: they conclude here.
  st.deciders_monitored.erase(dm.source);
  for (auto& [id, dec] : st.deciders) {
    if (dec.address() != dm.source)
      continue;
    auto r = st.rooms.find(id);
    if (r == st.rooms.end() || r->second.fsm().terminal())
      continue;
    log().log(level, "{} {}: its decider went down: {}", who(self), to_string(r->second.key()),
              caf::to_string(dm.reason));
    settle_without_decider(self, r->second,
                           decider_lost(st.deciders_heard.label_or(dm.source, unknown_decider())));
  }
  for (auto i = st.peers.begin(); i != st.peers.end();) {
    if (i->second.handle.address() != dm.source) {
      ++i;
      continue;
    }
    auto gone = i->first;
    log().log(level, "{} decode {} went down: {}", who(self), to_string(gone),
              caf::to_string(dm.reason));
    // Lost by its link, it may live on cut off: the cause both sides of a cut
    // word alike (its decider is of its instance).
    // Named from the rank that went, as the decider names it.
    failure why = link_lost(dm.reason) ? decider_lost(decider_ref(gone.instance))
                                       : failure{errc::peer_down,
                                                 "decode " + to_string(gone) + " went down (" +
                                                     caf::to_string(dm.reason) + ")",
                                                 gone};
    for (auto& [id, room] : st.rooms)
      for (auto& d : room.destinations())
        if (d.decode_rank == gone)
          report(self, room, why);
    i = st.peers.erase(i);
  }
}

/// A decode rank registers its layout (and its data-plane credential) with
/// this rank: it becomes a destination of rooms, or is refused with why.
caf::result<dest_accepted> accept_decode(self_ptr self, dest_registration& reg) {
  auto& st = self->state;
  if (auto old = st.incarnations_seen.stale(reg.decode_rank, st.cfg.self)) {
    log().warn("{} refused decode {}: {}", who(self), to_string(reg.decode_rank), old->cause);
    return make_error(old->code, old->cause);
  }
  if (auto bad = check_pairing(st.cfg.layout, reg.layout)) {
    log().error("{} refused decode {}: {}", who(self), to_string(reg.decode_rank), bad->cause);
    return make_error(bad->code, bad->cause);
  }
  if (!reg.checksum.empty() && !checksum_named(reg.checksum)) {
    auto cause = "checksum \"" + reg.checksum.substr(0, 32) + "\" of decode " +
                 to_string(reg.decode_rank) + ", expected off or xxh3";
    log().error("{} refused decode {}: {}", who(self), to_string(reg.decode_rank), cause);
    return make_error(errc::unsupported, cause);
  }
  if (auto seen = st.incarnations_seen.note(reg.decode_rank); seen.replaced)
    forget_incarnation(self, reg.decode_rank, seen.previous);
  self->monitor(reg.handle);
  st.peers.insert_or_assign(reg.decode_rank, prefill_rank_state::peer{reg.handle, reg.layout});
  // Staging when the decode rank offers a ring, this rank has a gather
  // buffer, and the two layouts would otherwise slice every token.
  bool staged =
      st.cfg.staging && reg.staging.offered() && staging_applies(st.cfg.layout, reg.layout);
  self->send(st.cfg.transfer, peer_connect{reg.decode_rank, reg.data_endpoint, reg.layout,
                                           staged ? reg.staging : staging_offer{},
                                           reg.data_credential, reg.checksum});
  log().info("{} accepted decode {} at {}{}", who(self), to_string(reg.decode_rank),
             reg.data_endpoint, staged ? " (staged)" : "");
  return dest_accepted{st.cfg.self, staged};
}

/// A decode rank asks for a room: handled now if open, answered from the
/// outcomes of cleared rooms, or kept for the open.
void on_request(self_ptr self, room_request& req) {
  auto& st = self->state;

  if (auto old = st.incarnations_seen.stale(req.decode_rank, st.cfg.self)) {
    self->send(req.decider, room_failure{req.key, std::move(*old)});
    return;
  }
  if (auto i = st.rooms.find(req.key.room); i != st.rooms.end()) {
    handle_request(self, i->second, req);
    return;
  }
  if (auto* v = st.early.cleared(req.key.room)) {
    if (v->outcome == kv_poll::failed)
      self->send(req.decider, room_failure{req.key, v->why});
    return;
  }
  keep_for_open(self, req);
}

/// Where this rank is published: it may register with its bootstrap now.
void on_control_endpoint(self_ptr self, control_endpoint& at) {
  auto& st = self->state;
  st.cfg.control = std::move(at);
  if (st.cfg.publish_first && !st.registered) {
    st.cfg.publish_first = false;
    if (!st.cfg.bootstrap.host.empty() || st.cfg.bootstrap.handle)
      register_with_bootstrap(self);
  }
}

/// From the bootstrap, after a rank of this instance left or joined.
void on_instance_topology(self_ptr self, topology& topo) {
  // From the bootstrap, after a rank of this instance left or joined.
  auto& st = self->state;
  st.siblings.clear();
  for (auto& r : topo.ranks)
    if (r.rank != st.cfg.self && r.handle)
      st.siblings.push_back(r.handle);
  auto was = st.instance_down.has_value();
  st.instance_down = instance_dead(topo);
  if (st.cfg.board) {
    if (st.instance_down)
      st.cfg.board->set_down(own_instance_key, *st.instance_down);
    else
      st.cfg.board->set_up(own_instance_key);
  }
  if (!st.instance_down) {
    if (was)
      log().info("{} the instance is whole again", who(self));
    return;
  }
  if (!was)
    log().log(departed_orderly(topo) ? spdlog::level::info : spdlog::level::warn, "{} {}",
              who(self), st.instance_down->cause);
  // Rooms bound to a decider cannot succeed: it hears why now.
  for (auto& [id, room] : st.rooms)
    if (!room.fsm().terminal() && !room.fsm().awaiting_verdict() && st.deciders.count(id))
      report(self, room, *st.instance_down);
}

/// Another rank of this instance concluded a room that lost its decider.
void on_sibling_concluded(self_ptr self, sibling_concluded& c) {
  auto& st = self->state;
  auto from = self->current_sender();
  if (std::none_of(st.siblings.begin(), st.siblings.end(),
                   [&](auto& s) { return s.address() == from; })) {
    log().warn(
        "{} room {}: dropped a sibling's conclusion from {}, not a rank of this "
        "instance",
        who(self), c.room, caf::to_string(from));
    return;
  }
  auto i = st.rooms.find(c.room);
  if (i == st.rooms.end() || st.deciders.count(c.room))
    return;  // not here, or its own decider concludes it
  auto& room = i->second;
  if (room.fsm().terminal() || room.fsm().awaiting_verdict())
    return;
  log().info("{} {}: a rank of this instance lost its decider: {}", who(self),
             to_string(room.key()), to_string(c.why));
  settle(self, room, kv_poll::failed, c.why);
}

/// A decider's verdict, for a room open here, cleared, or not opened yet.
void on_verdict(self_ptr self, room_verdict& v) {
  auto& st = self->state;
  // Only from the room's decider. Before the room is bound to one, a
  // decider that refused or failed it may not be known here yet: a
  // Failed verdict is taken, but Success never (this rank had not
  // finished its part of a room it is not bound in).
  if (auto d = st.deciders.find(v.key.room); d != st.deciders.end()) {
    if (!from(self, d->second.address(), who(self), "a verdict"))
      return;
  } else if (v.outcome != kv_poll::failed) {
    drop_stranger(self, who(self), "a Success verdict for a room not bound to a decider");
    return;
  }
  heard_from_sender(self);
  if (auto i = st.rooms.find(v.key.room); i != st.rooms.end()) {
    auto& room = i->second;
    if (room.key().generation == 0 && st.early.cleared_as(v.key))
      return;  // the verdict of the cleared room with this id, sent again
    room.adopt(v.key.generation);
    if (room.key().generation == v.key.generation) {
      note(self, v.key, "verdict " + to_string(v.outcome) + " from the decider",
           v.outcome == kv_poll::failed ? to_string(v.why) : std::string{});
      settle(self, room, v.outcome, v.why);
    }
    return;
  }
  // A verdict for a room this rank already cleared changes nothing.
  if (st.early.cleared(v.key.room))
    return;
  // The decider decided before the scheduler opened the room here.
  // Its wait runs out when the first request's would (if one waits already).
  if (st.early.keep_verdict(v, caf::actor_cast<decider_actor>(self->current_sender())) &&
      !st.early.expiry_armed(v.key.room))
    arm_expiry(self, v.key.room, v.key.generation);
}

}  // namespace kvferry::prefill_steps
