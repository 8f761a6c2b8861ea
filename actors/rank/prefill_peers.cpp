// The prefill rank's peers, and nothing of a room's progress: decode ranks'
// registrations, this instance's bootstrap and topology, and losing decode
// ranks, their incarnations and deciders.
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
#include "actors/rank/room_steps.hpp"
#include "messages/scheduler.hpp"
#include "messages/transfer.hpp"

namespace kvferry::prefill_steps {

namespace {

constexpr auto request_timeout = std::chrono::seconds{5};
constexpr auto register_retry = std::chrono::seconds{1};

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

/// Registers this rank with its instance's bootstrap (found first where only
/// its address is known), again a second later while it cannot.
void register_with_bootstrap(self_ptr self) {
  auto& loc = self->state.cfg.bootstrap;
  resolve_bootstrap(
      self, loc, request_timeout,
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
                          if (ack.instance != st.cfg.self.instance)
                            log().warn(
                                "{} registered as a rank of {}: its transfer and staging "
                                "actors name it {}, which staged rooms refuse; expected "
                                "the bootstrap's instance name",
                                who(self), ack.instance, st.cfg.self.instance);
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

}  // namespace kvferry::prefill_steps
