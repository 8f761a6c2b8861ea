#include "actors/rank/prefill_rank.hpp"

#include <algorithm>
#include <chrono>

#include <caf/actor_cast.hpp>

#include "actors/common/durations.hpp"
#include "actors/guard.hpp"
#include "actors/log.hpp"
#include "actors/plan/staging_plan.hpp"
#include "actors/plan/tp_mapping.hpp"
#include "actors/rank/decider_side.hpp"
#include "actors/rank/rank_guard.hpp"
#include "actors/rank/room_steps.hpp"
#include "actors/remote_lookup.hpp"
#include "messages/scheduler.hpp"
#include "messages/transfer.hpp"

namespace kvferry {

namespace {

using self_ptr = prefill_rank_actor::stateful_pointer<prefill_rank_state>;

constexpr auto request_timeout = std::chrono::seconds{5};
constexpr auto register_retry = std::chrono::seconds{1};

failure on_exception(self_ptr self, const std::string& what);

/// `f` (a response or lookup callback, the down handler), with what it
/// throws caught like a handler's.
template <class F>
auto guarded_callback(self_ptr self, F f) {
  return guard([self](const std::string& what) { return on_exception(self, what); }, std::move(f));
}

/// Mirrors the room's state into its published slot and schedules its
/// deadline; a concluded room with no write in flight releases its pages.
void sync(self_ptr self, prefill_room& room) {
  publish(self, room.slot(), room.key(), room.fsm());
  if (room.fsm().terminal() && room.in_flight() == 0 && room.slot())
    room.slot()->release();
}

/// Concludes a room with the decider's verdict (or alone), and releases its
/// source pages once no write of it is in flight.
void settle(self_ptr self, prefill_room& room, kv_poll outcome, const failure& why) {
  conclude(self, self->state.cfg.self, room, outcome, why);
  sync(self, room);
}

/// The room's decider was lost: this rank concludes without a verdict, and
/// tells the other ranks of the instance, which may hold the room with no
/// decode rank asking (their own deadline would word it otherwise).
void settle_without_decider(self_ptr self, prefill_room& room, const failure& why) {
  settle(self, room, kv_poll::failed, why);
  for (auto& s : self->state.siblings)
    self->send(s, sibling_concluded{room.id(), why});
}

/// A fault this rank saw in a room: the room's decider decides; without one
/// (no decode rank has asked for the room yet) the rank concludes alone.
void report(self_ptr self, prefill_room& room, failure why) {
  auto& fsm = room.fsm();
  if (fsm.terminal() || fsm.awaiting_verdict())
    return;  // the first root cause was already reported
  auto d = self->state.deciders.find(room.id());
  if (d == self->state.deciders.end()) {
    settle(self, room, kv_poll::failed, why);
    return;
  }
  log().info("{} {}: reporting to its decider: {}", who(self), to_string(room.key()),
             to_string(why));
  self->send(d->second, room_failure{room.key(), why});
  room.set_reported(std::move(why));
  fsm.await_verdict();
  sync(self, room);
}

/// This rank's part of the room is done: the decider hears it; the verdict
/// comes once every participant is done.
void finish(self_ptr self, prefill_room& room) {
  auto& st = self->state;
  auto d = st.deciders.find(room.id());
  if (room.fsm().terminal() || room.fsm().awaiting_verdict() || d == st.deciders.end())
    return;
  tell_finished(self, room, d->second);
  sync(self, room);
}

/// Hands every chunk that can go now to the transfer actor.
void dispatch(self_ptr self, prefill_room& room) {
  auto jobs = room.take_jobs();
  if (!jobs.empty() || (room.bound() && room.pages_accepted() > 0))
    room.fsm().advance(kv_poll::transferring);
  for (auto& job : jobs)
    self->send(self->state.cfg.transfer, std::move(job));
  if (room.done())
    finish(self, room);  // a rank whose destinations are all dummies writes nothing
  sync(self, room);
}

void handle_request(self_ptr self, prefill_room& room, const room_request& req) {
  auto& st = self->state;
  if (room.key().generation == 0)
    if (auto* old = st.early.cleared_as(req.key)) {
      // A late request of the cleared room with this id: answered as one
      // that came after the clear; the room opened again waits for its own.
      if (old->outcome == kv_poll::failed)
        self->send(req.decider, room_failure{req.key, old->why});
      return;
    }
  if (room.fsm().state() == kv_poll::failed) {
    // Concluded here already (alone, or by a verdict on a record the decider
    // has since forgotten): the decider hears why, whatever it keys it now.
    self->send(req.decider, room_failure{req.key, room.fsm().why()});
    return;
  }
  if (room.key().generation != 0 && room.key().generation != req.key.generation) {
    // Another incarnation of the id is live here: refuse the newcomer only.
    self->send(req.decider,
               room_failure{req.key, failure{errc::duplicate_room,
                                             to_string(req.key) + " requested while " +
                                                 to_string(room.key()) + " is live on " +
                                                 to_string(st.cfg.self),
                                             st.cfg.self}});
    return;
  }
  if (room.fsm().terminal()) {
    // Concluded alone before any decode rank asked: the decider hears why.
    if (room.fsm().state() == kv_poll::failed)
      self->send(req.decider, room_failure{req.key, room.fsm().why()});
    return;
  }
  if (!st.deciders.count(room.id())) {
    st.deciders.emplace(room.id(), req.decider);
    self->monitor(req.decider);
    watch_decider(self, req.decider, decider_ref(req.decode_rank.instance));
  }
  room.adopt(req.key.generation);
  if (st.instance_down) {
    // A rank of this instance is gone: the room cannot be served; the
    // decider decides (and words it) for every rank.
    report(self, room, *st.instance_down);
    return;
  }
  auto peer = st.peers.find(req.decode_rank);
  if (peer == st.peers.end()) {
    report(self, room,
           failure{errc::invalid_argument,
                   "request for " + to_string(req.key) + " from " + to_string(req.decode_rank) +
                       ", which has not registered its layout with this rank",
                   st.cfg.self});
    return;
  }
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
    case early_arrivals::kept::decided:
      return;
    case early_arrivals::kept::first:
      self->delayed_send(self, st.cfg.limits.bootstrapping, expire_atom_v, req.key.room,
                         req.key.generation);
      [[fallthrough]];
    case early_arrivals::kept::another:
      if (st.cfg.board)
        st.cfg.board->add_requested(req.key.room);
      return;
  }
}

/// The room opened: the requests and verdict that came first take effect.
void open_waited(self_ptr self, prefill_room& room, early_arrivals::waiting entry) {
  auto& st = self->state;
  if (st.cfg.board)
    st.cfg.board->remove_requested(room.id());
  if (entry.verdict) {
    if (entry.request.decider) {
      st.deciders.insert_or_assign(room.id(), entry.request.decider);
      self->monitor(entry.request.decider);
    }
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
  self->delayed_send(self, st.cfg.limits.bootstrapping, expire_atom_v, id, generation);
}

/// The decider of `room` (null while no decode rank asked for it).
decider_actor decider_of(self_ptr self, const prefill_room& room) {
  auto d = self->state.deciders.find(room.id());
  return d == self->state.deciders.end() ? decider_actor{} : d->second;
}

void register_with_bootstrap(self_ptr self) {
  auto& loc = self->state.cfg.bootstrap;
  resolve_published<bootstrap_actor>(
      self, loc.handle, loc.host, loc.port, request_timeout, "bootstrap",
      guarded_callback(self, [self](caf::expected<bootstrap_actor> found) {
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
                              st.cfg.control,       st.cfg.rank_generation};
        self->request(st.bootstrap, request_timeout, std::move(reg))
            .then(guarded_callback(self,
                                   [self](registration_ack& ack) {
                                     auto& st = self->state;
                                     st.registered = true;
                                     st.cfg.self.instance = ack.instance;
                                     st.cfg.self.instance_generation = ack.instance_generation;
                                     log().info("{} registered with bootstrap {}", who(self),
                                                st.cfg.bootstrap.key());
                                   }),
                  guarded_callback(self, [self](caf::error& err) {
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
  for (auto& [id, dec] : st.deciders) {
    if (dec.address() != dm.source)
      continue;
    auto r = st.rooms.find(id);
    if (r == st.rooms.end() || r->second.fsm().terminal())
      continue;
    log().log(level, "{} {}: its decider went down: {}", who(self), to_string(r->second.key()),
              caf::to_string(dm.reason));
    settle_without_decider(self, r->second,
                           decider_lost(st.heard.label_or(dm.source, unknown_decider())));
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
    failure why = link_lost(dm.reason) ? decider_lost(decider_ref(gone.instance))
                                       : failure{errc::peer_down,
                                                 "decode " + to_string(gone) + " went down (" +
                                                     caf::to_string(dm.reason) + ")",
                                                 st.cfg.self};
    for (auto& [id, room] : st.rooms)
      for (auto& d : room.destinations())
        if (d.decode_rank == gone)
          report(self, room, why);
    i = st.peers.erase(i);
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

/// A room's deadline fired (unless it moved on since: `epoch`).
void on_deadline(self_ptr self, uint64_t id, uint64_t epoch) {
  auto& st = self->state;
  auto i = st.rooms.find(id);
  if (i == st.rooms.end() || !i->second.fsm().is_current(epoch))
    return;
  auto& room = i->second;
  auto decider = decider_of(self, room);
  if (room.fsm().awaiting_verdict()) {
    verdict_overdue(
        self, room, decider,
        [&](const failure& why) {
          self->send(decider, room_failure{room.key(), why});
          sync(self, room);
        },
        // The others find out by their own check; the decider, back, assumes
        // these words.
        [&] {
          settle_without_decider(
              self, room, decider_lost(st.heard.label_or(decider.address(), unknown_decider())));
        },
        [&](const failure& why) { settle(self, room, kv_poll::failed, why); });
    return;
  }
  if (!decider) {
    // No decode rank ever asked for the room: every rank of this instance
    // concludes alone, and all of them say the same.
    settle(self, room, kv_poll::failed,
           failure{
               errc::deadline, room.fsm().stuck_cause(room.key()) + ": no decode rank asked for it",
               instance_ref(role::prefill, st.cfg.self.instance, st.cfg.self.instance_generation)});
    return;
  }
  report(self, room, failure{errc::deadline, room.fsm().stuck_cause(room.key()), st.cfg.self});
}

/// An exception escaped a handler: every live room of this rank fails with it.
failure on_exception(self_ptr self, const std::string& what) {
  return fail_live_rooms(self, what,
                         [](self_ptr s, auto& room, const failure& why) { report(s, room, why); });
}

}  // namespace

prefill_rank_actor::behavior_type prefill_rank(
    prefill_rank_actor::stateful_pointer<prefill_rank_state> self, prefill_rank_config cfg) {
  self->state.cfg = std::move(cfg);
  self->set_down_handler(guarded_callback(self, [self](caf::down_msg& dm) { on_down(self, dm); }));
  // The transfer actor lives and dies with its rank: no orphan keeps writing.
  self->link_to(self->state.cfg.transfer);
  if ((!self->state.cfg.bootstrap.host.empty() || self->state.cfg.bootstrap.handle) &&
      !self->state.cfg.publish_first)
    register_with_bootstrap(self);
  return guarded<prefill_rank_actor::behavior_type>(
      [self](const std::string& what) { return on_exception(self, what); },
      // -- scheduler ------------------------------------------------------------
      [self](room_open_atom, uint64_t id, room_slot_ptr slot) {
        if (!from_this_process(self, who(self), "room_open"))
          return;
        auto& st = self->state;
        if (refuse_reopen(st.rooms, id, slot, st.cfg.self))
          return;
        // The tombstones of the id stay: late messages of the cleared room
        // must not bind or conclude this one (cleared_as).
        auto& room =
            st.rooms.try_emplace(id, id, std::move(slot), st.cfg.self, st.cfg.layout, st.cfg.limits)
                .first->second;
        if (auto entry = st.early.take(id))
          open_waited(self, room, std::move(*entry));
        else
          sync(self, room);
      },
      [self](sender_init& msg) -> caf::result<void> {
        if (!from_this_process(self, who(self), "sender_init"))
          return caf::make_error(caf::sec::unexpected_message);
        auto i = self->state.rooms.find(msg.room);
        if (i == self->state.rooms.end())
          return unknown_room(self->state.cfg.self, msg.room);
        if (auto bad = i->second.init(msg.num_pages, msg.aux_slot))
          report(self, i->second, std::move(*bad));
        else
          dispatch(self, i->second);
        return caf::unit;
      },
      [self](chunk_send& msg) -> caf::result<void> {
        if (!from_this_process(self, who(self), "chunk_send"))
          return caf::make_error(caf::sec::unexpected_message);
        auto i = self->state.rooms.find(msg.room);
        if (i == self->state.rooms.end())
          return unknown_room(self->state.cfg.self, msg.room);
        if (auto bad = i->second.accept(std::move(msg.pages), msg.last, std::move(msg.states)))
          report(self, i->second, std::move(*bad));
        else
          dispatch(self, i->second);
        return caf::unit;
      },
      [self](room_abort_atom, uint64_t id) -> caf::result<void> {
        if (!from_this_process(self, who(self), "room_abort"))
          return caf::make_error(caf::sec::unexpected_message);
        auto i = self->state.rooms.find(id);
        if (i == self->state.rooms.end())
          return unknown_room(self->state.cfg.self, id);
        report(self, i->second,
               failure{errc::aborted, "aborted by the prefill scheduler", self->state.cfg.self});
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
                         "cleared by the prefill scheduler in " + to_string(room.fsm().state()),
                         st.cfg.self});
        st.early.bury(
            id, cleared_outcome(room.key(), room.fsm().state(), room.fsm().why(), st.cfg.self));
        st.rooms.erase(i);
        st.deciders.erase(id);
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
      // -- decode ranks ---------------------------------------------------------
      [self](dest_registration& reg) -> caf::result<dest_accepted> {
        auto& st = self->state;
        if (auto old = st.generations.stale(reg.decode_rank, st.cfg.self)) {
          log().warn("{} refused decode {}: {}", who(self), to_string(reg.decode_rank), old->cause);
          return make_error(old->code, old->cause);
        }
        if (auto bad = check_pairing(st.cfg.layout, reg.layout)) {
          log().error("{} refused decode {}: {}", who(self), to_string(reg.decode_rank),
                      bad->cause);
          return make_error(bad->code, bad->cause);
        }
        if (auto seen = st.generations.note(reg.decode_rank); seen.replaced)
          forget_incarnation(self, reg.decode_rank, seen.previous);
        self->monitor(reg.handle);
        st.peers.insert_or_assign(reg.decode_rank,
                                  prefill_rank_state::peer{reg.handle, reg.layout});
        // Staging when the decode rank offers a ring, this rank has a gather
        // buffer, and the two layouts would otherwise slice every token.
        bool staged =
            st.cfg.staging && reg.staging.offered() && staging_applies(st.cfg.layout, reg.layout);
        self->send(st.cfg.transfer,
                   peer_connect{reg.decode_rank, reg.data_endpoint, reg.layout,
                                staged ? reg.staging : staging_offer{}, reg.data_credential});
        log().info("{} accepted decode {} at {}{}", who(self), to_string(reg.decode_rank),
                   reg.data_endpoint, staged ? " (staged)" : "");
        return dest_accepted{st.cfg.self, staged};
      },
      [self](room_request& req) {
        auto& st = self->state;

        if (auto old = st.generations.stale(req.decode_rank, st.cfg.self)) {
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
      },
      [self](control_endpoint& at) {
        auto& st = self->state;
        st.cfg.control = std::move(at);
        if (st.cfg.publish_first && !st.registered) {
          st.cfg.publish_first = false;
          if (!st.cfg.bootstrap.host.empty() || st.cfg.bootstrap.handle)
            register_with_bootstrap(self);
        }
      },
      [self](topology& topo) {
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
          log().warn("{} {}", who(self), st.instance_down->cause);
        // Rooms bound to a decider cannot succeed: it hears why now.
        for (auto& [id, room] : st.rooms)
          if (!room.fsm().terminal() && !room.fsm().awaiting_verdict() && st.deciders.count(id))
            report(self, room, *st.instance_down);
      },
      [self](sibling_concluded& c) {
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
      },
      [self](room_verdict& v) {
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
          if (room.key().generation == v.key.generation)
            settle(self, room, v.outcome, v.why);
          return;
        }
        // A verdict for a room this rank already cleared changes nothing.
        if (st.early.cleared(v.key.room))
          return;
        // The decider decided before the scheduler opened the room here.
        if (st.early.keep_verdict(v, caf::actor_cast<decider_actor>(self->current_sender())))
          self->delayed_send(self, st.cfg.limits.bootstrapping, expire_atom_v, v.key.room,
                             v.key.generation);
      },
      [self](heartbeat_atom, uint64_t seq) -> caf::result<heartbeat_atom, uint64_t> {
        answer_ping(self, [self](const prefill_room& room) { return decider_of(self, room); });
        return {heartbeat_atom_v, seq};
      },
      // -- transfer actor -------------------------------------------------------
      [self](chunk_result& r) {
        auto& st = self->state;
        auto i = st.rooms.find(r.key.room);
        if (i == st.rooms.end() || i->second.key().generation != r.key.generation)
          return;  // the room was cleared meanwhile
        auto& room = i->second;
        bool dest_done = room.landed(r.peer);
        if (r.why) {
          report(self, room, std::move(r.why));
          sync(self, room);  // a concluded room may release its pages now
          return;
        }
        if (auto p = st.peers.find(r.peer); p != st.peers.end())
          self->send(p->second.handle, chunk_landed{r.key, st.cfg.self, r.chunk, r.pages, r.bytes,
                                                    dest_done, r.staged, r.first_page});
        room.fsm().touch();
        if (room.done())
          finish(self, room);
        sync(self, room);
      },
      // -- timers ---------------------------------------------------------------
      [self](deadline_atom, uint64_t id, uint64_t epoch) { on_deadline(self, id, epoch); },
      [self](expire_atom, uint64_t id, uint64_t generation) {
        expire_waiting(self, id, generation);
      },
      [self](register_atom) { register_with_bootstrap(self); },
      [self](beat_atom) {
        check_beat(
            self, [self](const prefill_room& room) { return decider_of(self, room); },
            [self](prefill_room& room, const failure& why) {
              settle(self, room, kv_poll::failed, why);
            });
      });
}

}  // namespace kvferry
