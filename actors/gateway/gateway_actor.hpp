// The gateway of a process whose control plane runs over TLS
// (messages/gateway.hpp says why there is one): publishes this process's
// actors behind its one TLS listener per port, answers remote lookups, and
// finds the actors other processes published, one connection per remote
// process. Spawned on first use and kept in the actor system's registry.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <set>
#include <string>

#include <caf/actor_addr.hpp>
#include <caf/actor_system.hpp>
#include <caf/response_promise.hpp>

#include "actors/base/sender_check.hpp"
#include "actors/gateway/door_book.hpp"
#include "actors/gateway/node_identity.hpp"
#include "messages/gateway.hpp"

namespace kvferry {

struct gateway_state {
  static inline const char* name = "kvferry.gateway";

  struct entry {
    caf::strong_actor_ptr whom;
    std::set<std::string> interface;
  };
  door_book<entry, gateway_actor, caf::typed_response_promise<published_actor>> book;
  std::set<caf::actor_addr> monitored;  ///< remote gateways watched for their end
  /// This process's certificate and key (the openssl options of its actor
  /// system), to prove its node to other gateways and check theirs' lookers.
  std::shared_ptr<node_identity> me;
  std::string identity_error;  ///< why `me` could not be loaded
  stranger_log<caf::actor_addr> strangers;
};

/// How long the gateway waits for a connection to, or an answer from, a
/// remote gateway.
inline constexpr std::chrono::seconds gateway_timeout{8};

gateway_actor::behavior_type gateway(gateway_actor::stateful_pointer<gateway_state> self);

/// The gateway of `sys`, spawned on first call (thread-safe). Only for an
/// actor system that loaded caf::openssl::manager.
gateway_actor gateway_of(caf::actor_system& sys);

}  // namespace kvferry
