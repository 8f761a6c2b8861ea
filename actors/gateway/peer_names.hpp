// The node names that processes proved at this process's gateway under TLS
// (node_identity.hpp), by CAF node id: shared on purpose with the actors that
// take registrations (bootstrap, decider, status), which ask whether a
// message's sender speaks for the node the cluster file places there.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <caf/actor_system.hpp>
#include <caf/node_id.hpp>

namespace kvferry {

/// Processes remembered at most; past it the oldest is forgotten (it proves
/// itself again at its next lookup).
inline constexpr size_t max_proven_peers = 4096;

/// The name kvferry-ctl's certificate carries (CN=ctl, deploy/make-certs.sh);
/// no node may be named so.
inline constexpr std::string_view ctl_identity = "ctl";

/// Records that `node` proved node name `name` (the gateway does).
void remember_node_name(const caf::node_id& node, const std::string& name);

/// The name `node` proved, if it did.
std::optional<std::string> proven_node_name(const caf::node_id& node);

/// This process's own node name (its certificate's CN), set by its gateway.
void set_own_node_name(const std::string& name);

/// True when a message from `sender` may act for node `expected`: always
/// without TLS or without an expectation; under TLS, when `sender` is this
/// process and its certificate names `expected`, or when `sender` proved
/// `expected` at this gateway. Else false, and `why` says what it proved.
bool speaks_for(caf::actor_system& sys, const caf::node_id& sender, const std::string& expected,
                std::string& why);

}  // namespace kvferry
