// The bootstrap actor: the directory of one prefill instance, published on the
// instance's bootstrap port. It monitors every registered rank and drops a
// rank that terminates, so a topology never names a dead actor for long, and
// tells the decode ranks that asked for the topology (rank_left). With DP
// attention it also serves each DP group of the instance as a directory of
// its own: a child bootstrap per group, made on first ask, that ends with it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

#include <caf/actor_addr.hpp>

#include "actors/base/guard.hpp"
#include "actors/bootstrap/directory.hpp"
#include "actors/bootstrap/room_routes.hpp"
#include "actors/process/life_token.hpp"
#include "messages/handles.hpp"

namespace kvferry {

struct bootstrap_state {
  static inline const char* name = "kvferry.bootstrap";

  directory dir{"", 0};
  /// A registered rank: who it is, and its handle (told of every change).
  struct member {
    rank_ref rank;
    prefill_rank_actor handle;
    std::string life;  ///< its process's life token, when watched from here
  };
  std::map<caf::actor_addr, member> by_actor;  // registered handles → their rank
  /// Decode ranks that asked for the topology: told when a rank leaves.
  std::map<caf::actor_addr, decode_rank_actor> watchers;
  /// Under TLS, the node whose processes may register ranks (its
  /// certificate's CN, proven at the gateway); empty: any.
  std::string node;
  /// The life tokens of registered ranks' processes on this host: a death
  /// is known within a millisecond (actors/process/life_token.hpp).
  life_watch lives;
  /// DP attention: the bootstraps of the instance's DP groups, by group.
  std::map<uint32_t, bootstrap_actor> groups;
  /// How many DP groups the instance has, as its prefill ranks said (0: none said).
  uint32_t dp_size = 0;
  /// DP attention without follow_bootstrap_room: the group of each room, as
  /// the prefill ranks registered it (kept two minutes, a million at most).
  room_routes routes{size_t{1} << 20, std::chrono::seconds{120}};
  /// A DP group's bootstrap: the instance's, which it ends with (else none).
  caf::actor_addr parent;
  /// Run first inside the guard of every handler (actors/base/guard.hpp).
  handler_hook before_handler;
};

/// Spawns with `instance` (the prefill instance's name) and `generation` (its
/// incarnation; pass a fresh value per start, e.g. from the clock).
bootstrap_actor::behavior_type bootstrap(bootstrap_actor::stateful_pointer<bootstrap_state> self,
                                         std::string instance, uint64_t generation);

/// The same, told where it is published ("host:port"): the address appears
/// in the cause of every room that fails because the instance is dead.
bootstrap_actor::behavior_type bootstrap_at(bootstrap_actor::stateful_pointer<bootstrap_state> self,
                                            std::string instance, uint64_t generation,
                                            std::string address);

/// The same, on node `node` of the cluster file: under TLS only processes
/// that proved that node at this process's gateway register ranks.
bootstrap_actor::behavior_type bootstrap_on(bootstrap_actor::stateful_pointer<bootstrap_state> self,
                                            std::string instance, uint64_t generation,
                                            std::string address, std::string node);

/// A generation for a new instance incarnation: the wall clock in nanoseconds.
uint64_t fresh_generation();

}  // namespace kvferry
