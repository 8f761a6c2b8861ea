#include "actors/bootstrap/bootstrap_actor.hpp"

#include <chrono>
#include <optional>
#include <vector>

#include "actors/base/guard.hpp"
#include "actors/base/log.hpp"
#include "actors/gateway/peer_names.hpp"
#include "actors/process/life_notice.hpp"
#include "messages/bootstrap.hpp"
#include "messages/failure.hpp"
#include "messages/life.hpp"
#include "messages/wall_clock.hpp"

namespace kvferry {

namespace {

using self_ptr = bootstrap_actor::stateful_pointer<bootstrap_state>;

/// The most rooms one query of their DP groups may name.
constexpr size_t max_room_query = 65536;

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

/// The rank registered under `addr` left (its actor ended, its link dropped,
/// or its process died): the departure is recorded, the decode ranks that
/// looked the instance up hear of it at once, and so do the ranks here.
void leave(self_ptr self, const caf::actor_addr& addr, const std::string& reason, bool orderly,
           bool link) {
  auto& st = self->state;
  auto i = st.by_actor.find(addr);
  if (i == st.by_actor.end())
    return;
  log().log(orderly ? spdlog::level::info : spdlog::level::warn,
            "[bootstrap {}] {} left ({}): the instance serves no room until it is back",
            st.dir.instance(), to_string(i->second.rank), reason);
  if (!i->second.life.empty())
    st.lives.forget(i->second.life);
  rank_left note{i->second.rank, reason, orderly, link, wall_ns(), {}};
  auto recorded = st.dir.depart(std::move(note));
  st.by_actor.erase(i);
  if (!recorded)
    return;
  for (auto& [a, watcher] : st.watchers)
    self->send(watcher, *recorded);
  tell_members(self);
}

/// Watches the life token of a rank registered from another process on
/// this host: its death is known before its connection drops.
void watch_life(self_ptr self, bootstrap_state::member& m, const life_token_ref& life) {
  if (watch_life_for<bootstrap_actor>(self->state.lives, self, life))
    m.life = life.name;
}

/// Under TLS only the instance's node speaks for it (registers ranks, says
/// its DP size and routing): why the sender of the current message may not,
/// nullopt when it may.
std::optional<std::string> not_its_node(self_ptr self) {
  std::string why;
  if (auto s = self->current_sender();
      s && speaks_for(self->home_system(), s->node(), self->state.node, why))
    return std::nullopt;
  return why;
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

namespace {

/// A prefill rank registers: refused unless its node speaks for it and the
/// directory takes it; a re-registration replaces the old handle of the same
/// (tp, pp). The members hear of it, and the decode ranks watching the
/// instance too once it is whole again.
caf::result<registration_ack> on_register(bootstrap_actor::stateful_pointer<bootstrap_state> self,
                                          rank_registration& reg) {
  if (auto why = not_its_node(self)) {
    auto what = "[bootstrap " + self->state.dir.instance() + "] refused the registration of " +
                to_string(reg.rank) + ": " + *why;
    log().warn("{}", what);
    return make_error(errc::invalid_argument, what);
  }
  auto handle = reg.handle;
  auto rank = reg.rank;
  auto life = reg.life;
  if (auto bad = self->state.dir.add(std::move(reg))) {
    log().error("[bootstrap {}] refused {}: {}", self->state.dir.instance(), to_string(rank), *bad);
    return make_error(errc::invalid_argument, *bad);
  }
  rank.instance = self->state.dir.instance();
  rank.instance_generation = self->state.dir.generation();
  // A re-registration replaces the old handle of the same (tp, pp).
  for (auto i = self->state.by_actor.begin(); i != self->state.by_actor.end();) {
    if (i->second.rank.tp == rank.tp && i->second.rank.pp == rank.pp) {
      if (!i->second.life.empty())
        self->state.lives.forget(i->second.life);
      i = self->state.by_actor.erase(i);
    } else {
      ++i;
    }
  }
  auto& m = self->state.by_actor[handle.address()];
  m = bootstrap_state::member{rank, handle, {}};
  watch_life(self, m, life);
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
}

/// A DP group's bootstrap: a bootstrap of its own that ends with `parent`,
/// the instance's.
bootstrap_actor::behavior_type group_bootstrap(self_ptr self, std::string instance,
                                               uint64_t generation, std::string address,
                                               std::string node, bootstrap_actor parent) {
  self->state.parent = parent.address();
  self->monitor(parent);
  return bootstrap_on(self, std::move(instance), generation, std::move(address), std::move(node));
}

/// A DP group's bootstrap ended: only its group goes (made again on the
/// next ask). False when `dm` is not of one.
bool forget_group(self_ptr self, const caf::down_msg& dm) {
  auto& groups = self->state.groups;
  for (auto i = groups.begin(); i != groups.end(); ++i)
    if (i->second.address() == dm.source) {
      log().warn("[bootstrap {}] the bootstrap of DP group {} ended ({})",
                 self->state.dir.instance(), i->first, caf::to_string(dm.reason));
      groups.erase(i);
      return true;
    }
  return false;
}

/// DP attention: the bootstrap of DP group `group`, made on first ask (a
/// directory of its own, named "<instance>/dp<g>", on this bootstrap's node
/// rule and address, that ends with this one).
caf::result<caf::strong_actor_ptr> on_dp_group(self_ptr self, uint32_t group, uint32_t asked) {
  auto& st = self->state;
  // Saying how many groups the instance has is a prefill rank's word: under
  // TLS only its node's processes may (as they alone register ranks).
  if (auto why = asked != 0 ? not_its_node(self) : std::nullopt) {
    auto what = "[bootstrap " + st.dir.instance() + "] refused a DP size of " +
                std::to_string(asked) + ": " + *why;
    log().warn("{}", what);
    return make_error(errc::invalid_argument, what);
  }
  if (auto bad = dp_group_problem(st.dir.instance(), st.dp_size, group, asked)) {
    log().warn("[bootstrap {}] refused: {}", st.dir.instance(), *bad);
    return make_error(errc::invalid_argument, *bad);
  }
  if (asked != 0 && st.dp_size == 0)
    st.dp_size = asked;
  auto i = st.groups.find(group);
  if (i == st.groups.end()) {
    auto name = dp_group_instance(st.dir.instance(), group);
    auto child = self->spawn(group_bootstrap, name, st.dir.generation(), st.dir.address(), st.node,
                             caf::actor_cast<bootstrap_actor>(self));
    self->monitor(child);
    log().info("[bootstrap {}] serves DP group {} as {}", st.dir.instance(), group, name);
    i = st.groups.emplace(group, child).first;
  }
  return caf::actor_cast<caf::strong_actor_ptr>(i->second);
}

/// A prefill rank says how its instance's rooms find their DP group (or
/// registers one room's group): the refusal, unless its node speaks for the
/// instance and `apply` takes the word (it returns the problem, if any).
template <class Apply>
std::optional<caf::error> route_refused(self_ptr self, const std::string& what, Apply apply) {
  auto problem = not_its_node(self);
  if (problem)
    problem = "refused " + what + ": " + *problem;
  else
    problem = apply();
  if (!problem)
    return std::nullopt;
  log().warn("[bootstrap {}] {}", self->state.dir.instance(), *problem);
  return make_error(errc::invalid_argument, *problem);
}

caf::result<bool> on_route_room(self_ptr self, uint64_t room, uint32_t group) {
  auto& st = self->state;
  auto now = std::chrono::steady_clock::now().time_since_epoch().count();
  auto evicted = st.routes.evicted();
  auto what = "room " + std::to_string(room) + "'s DP group";
  auto refused = route_refused(
      self, what, [&] { return st.routes.add(room, group, st.dp_size, st.dir.instance(), now); });
  // At 1, 2, 4, ... rooms dropped: a decode rank that asks after them
  // never resolves them (its room ends by its deadline).
  if (auto n = st.routes.evicted(); n > evicted && (n & (n - 1)) == 0)
    log().warn(
        "[bootstrap {}] dropped the DP groups of {} rooms to stay within {} rooms "
        "registered at once",
        st.dir.instance(), n, st.routes.size());
  if (refused)
    return *refused;
  return true;
}

}  // namespace

bootstrap_actor::behavior_type bootstrap_on(bootstrap_actor::stateful_pointer<bootstrap_state> self,
                                            std::string instance, uint64_t generation,
                                            std::string address, std::string node) {
  self->state.node = std::move(node);
  self->state.dir = directory{std::move(instance), generation, std::move(address)};
  self->set_down_handler(guard(self, on_exception, [self](caf::down_msg& dm) {
    if (self->state.watchers.erase(dm.source) > 0)
      return;
    if (dm.source == self->state.parent) {  // a DP group's bootstrap ends with its instance's
      self->quit(dm.reason);
      return;
    }
    if (forget_group(self, dm))
      return;
    leave(self, dm.source, caf::to_string(dm.reason), dm.reason == caf::exit_reason::user_shutdown,
          link_lost(dm.reason));
  }));
  return guarded<bootstrap_actor::behavior_type>(
      self, on_exception,
      [self](rank_registration& reg) -> caf::result<registration_ack> {
        return on_register(self, reg);
      },
      [self](topology_atom) -> caf::result<topology> {
        // A decode rank asks: it hears from now on which ranks leave.
        if (auto w = caf::actor_cast<decode_rank_actor>(self->current_sender())) {
          if (self->state.watchers.emplace(w.address(), w).second)
            self->monitor(w);
        }
        return self->state.dir.snapshot();
      },
      [self](dp_group_atom, uint32_t group, uint32_t dp_size)
          -> caf::result<caf::strong_actor_ptr> { return on_dp_group(self, group, dp_size); },
      [self](dp_group_atom) -> caf::result<uint32_t> {
        // 1 once the instance had a rank of its own (it may be dead now).
        auto& st = self->state;
        auto had_rank = st.dir.size() > 0 || st.dir.snapshot().dead();
        return st.dp_size != 0 ? st.dp_size : had_rank ? 1u : 0u;
      },
      [self](dp_route_atom, bool follows) -> caf::result<bool> {
        auto& st = self->state;
        if (auto refused = route_refused(self, "a DP routing", [&] {
              return st.routes.set_follows_room(follows, st.dir.instance());
            }))
          return *refused;
        return st.routes.follows_room();
      },
      [self](dp_route_atom) -> caf::result<bool> { return self->state.routes.follows_room(); },
      [self](dp_route_atom, uint64_t room, uint32_t group) -> caf::result<bool> {
        return on_route_room(self, room, group);
      },
      [self](room_dp_query& q) -> caf::result<room_dp_groups> {
        if (q.rooms.size() > max_room_query)
          return make_error(errc::invalid_argument,
                            "a query of the DP groups of " + std::to_string(q.rooms.size()) +
                                " rooms; expected at most " + std::to_string(max_room_query));
        auto now = std::chrono::steady_clock::now().time_since_epoch().count();
        room_dp_groups out;
        for (auto& [room, group] : self->state.routes.find(q.rooms, now)) {
          out.rooms.push_back(room);
          out.groups.push_back(group);
        }
        return out;
      },
      [self](life_ended& e) {
        // A registered rank's process died: it left, as its down_msg will
        // say once its connection drops (after the kernel tore the process
        // down). A process that ended in order says so by its down_msg.
        if (!e.died)
          return;
        std::vector<caf::actor_addr> gone;
        for (auto& [addr, m] : self->state.by_actor)
          if (m.life == e.name)
            gone.push_back(addr);
        for (auto& addr : gone)
          leave(self, addr, "its process died, seen by its life token", false, true);
      });
}

}  // namespace kvferry
