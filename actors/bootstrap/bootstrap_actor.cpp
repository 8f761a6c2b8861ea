#include "actors/bootstrap/bootstrap_actor.hpp"

#include <chrono>

#include "actors/gateway/peer_names.hpp"
#include "actors/guard.hpp"
#include "actors/log.hpp"
#include "messages/bootstrap.hpp"
#include "messages/failure.hpp"

namespace kvferry {

namespace {

using self_ptr = bootstrap_actor::stateful_pointer<bootstrap_state>;

int64_t wall_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// An exception escaped a handler. The bootstrap holds no room: the request
/// that hit it gets the failure back (a decode rank fails the rooms waiting
/// for its topology with it), and the directory carries on. A bootstrap is
/// no rank: the failure names its instance.
failure on_exception(self_ptr self, const std::string& what) {
  auto& dir = self->state.dir;
  log().error("[bootstrap {}] exception in a handler: {}", dir.instance(), what);
  return failure{errc::internal, "exception in the bootstrap of " + dir.instance() + ": " + what,
                 instance_ref(role::prefill, dir.instance(), dir.generation())};
}

/// Every registered rank hears the instance's topology after each change: a
/// rank knows whether its instance can serve rooms (and why not).
void tell_members(self_ptr self) {
  auto topo = self->state.dir.snapshot();
  for (auto& [addr, m] : self->state.by_actor)
    self->send(m.handle, topo);
}

}  // namespace

uint64_t fresh_generation() {
  auto now = std::chrono::system_clock::now().time_since_epoch();
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count());
}

bootstrap_actor::behavior_type bootstrap(bootstrap_actor::stateful_pointer<bootstrap_state> self,
                                         std::string instance, uint64_t generation) {
  return bootstrap_at(self, std::move(instance), generation, {});
}

bootstrap_actor::behavior_type bootstrap_at(bootstrap_actor::stateful_pointer<bootstrap_state> self,
                                            std::string instance, uint64_t generation,
                                            std::string address) {
  return bootstrap_on(self, std::move(instance), generation, std::move(address), {});
}

bootstrap_actor::behavior_type bootstrap_on(bootstrap_actor::stateful_pointer<bootstrap_state> self,
                                            std::string instance, uint64_t generation,
                                            std::string address, std::string node) {
  self->state.node = std::move(node);
  self->state.dir = directory{std::move(instance), generation, std::move(address)};
  self->set_down_handler(guard(self, on_exception, [self](caf::down_msg& dm) {
    if (self->state.watchers.erase(dm.source) > 0)
      return;
    auto i = self->state.by_actor.find(dm.source);
    if (i == self->state.by_actor.end())
      return;
    auto level =
        dm.reason == caf::exit_reason::user_shutdown ? spdlog::level::info : spdlog::level::warn;
    log().log(level, "[bootstrap {}] {} left ({}): the instance serves no room until it is back",
              self->state.dir.instance(), to_string(i->second.rank), caf::to_string(dm.reason));
    rank_left note{i->second.rank,
                   caf::to_string(dm.reason),
                   dm.reason == caf::exit_reason::user_shutdown,
                   link_lost(dm.reason),
                   wall_clock_ns(),
                   {}};
    auto recorded = self->state.dir.depart(std::move(note));
    self->state.by_actor.erase(i);
    if (!recorded)
      return;
    for (auto& [addr, watcher] : self->state.watchers)
      self->send(watcher, *recorded);
    tell_members(self);
  }));
  return guarded<bootstrap_actor::behavior_type>(
      self, on_exception,
      [self](rank_registration& reg) -> caf::result<registration_ack> {
        std::string why;
        if (auto s = self->current_sender();
            !s || !speaks_for(self->home_system(), s->node(), self->state.node, why)) {
          auto what = "[bootstrap " + self->state.dir.instance() +
                      "] refused the registration of " + to_string(reg.rank) + ": " + why;
          log().warn("{}", what);
          return make_error(errc::invalid_argument, what);
        }
        auto handle = reg.handle;
        auto rank = reg.rank;
        if (auto bad = self->state.dir.add(std::move(reg))) {
          log().error("[bootstrap {}] refused {}: {}", self->state.dir.instance(), to_string(rank),
                      *bad);
          return make_error(errc::invalid_argument, *bad);
        }
        rank.instance = self->state.dir.instance();
        rank.instance_generation = self->state.dir.generation();
        // A re-registration replaces the old handle of the same (tp, pp).
        for (auto i = self->state.by_actor.begin(); i != self->state.by_actor.end();) {
          if (i->second.rank.tp == rank.tp && i->second.rank.pp == rank.pp)
            i = self->state.by_actor.erase(i);
          else
            ++i;
        }
        self->state.by_actor.insert_or_assign(handle.address(),
                                              bootstrap_state::member{rank, handle});
        self->monitor(handle);
        log().info("[bootstrap {}] {} registered ({} of the instance)", self->state.dir.instance(),
                   to_string(rank), self->state.dir.size());
        tell_members(self);
        // Whole again after a rank came back: the decode ranks that know the
        // instance look it up now instead of at their next probe.
        auto topo = self->state.dir.snapshot();
        if (topo.complete())
          for (auto& [addr, watcher] : self->state.watchers)
            self->send(watcher, topo);
        return registration_ack{self->state.dir.instance(), self->state.dir.generation()};
      },
      [self](topology_atom) -> caf::result<topology> {
        // A decode rank asks: it hears from now on which ranks leave.
        if (auto w = caf::actor_cast<decode_rank_actor>(self->current_sender())) {
          if (self->state.watchers.emplace(w.address(), w).second)
            self->monitor(w);
        }
        return self->state.dir.snapshot();
      });
}

}  // namespace kvferry
