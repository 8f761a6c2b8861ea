// The gateway of a process, when the control plane runs over TLS
// (caf::openssl). CAF 0.17's TLS transport breaks every message between two
// processes once a second connection opens between them (a second published
// port of the same process, caf-0.17-guide.md §7 bug 7). So under TLS a
// process publishes one actor only, its gateway, on every port it listens on;
// a process that looks up a published actor asks its own gateway, which makes
// at most one connection per remote process and asks the remote gateway for
// the actor published on the port.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <caf/actor_control_block.hpp>
#include <caf/atom.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

namespace kvferry {

using lookup_atom = caf::atom_constant<caf::atom("lookup")>;
constexpr lookup_atom lookup_atom_v{};

/// What a gateway has published on one of its ports.
struct published_actor {
  caf::strong_actor_ptr whom;
  std::set<std::string> interface;  ///< the published actor's message types
  /// Every port the gateway's process listens on: a looker caches the gateway
  /// for each, and never connects to that process a second time.
  std::vector<uint16_t> ports;

  friend bool operator==(const published_actor&, const published_actor&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, published_actor& x) {
  return f(caf::meta::type_name("kvferry.published_actor"), x.whom, x.interface, x.ports);
}

/// Which node a looker speaks for (actors/gateway/node_identity.hpp): its
/// certificate, PEM, and its signature over a statement that names its
/// process and the gateway's.
struct identity_proof {
  std::string certificate;
  std::string signature;

  friend bool operator==(const identity_proof&, const identity_proof&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, identity_proof& x) {
  return f(caf::meta::type_name("kvferry.identity_proof"), x.certificate, x.signature);
}

using gateway_actor = caf::typed_actor<
    // other processes: the actor published on a port of this process, for a
    // looker that proves which node it speaks for
    caf::replies_to<lookup_atom, uint16_t, identity_proof>::with<published_actor>,
    // this process only: publish an actor on a port (0: any free one) of an
    // address, withdraw it, find the actor another process published
    caf::replies_to<caf::publish_atom, caf::strong_actor_ptr, std::set<std::string>, uint16_t,
                    std::string>::with<uint16_t>,
    caf::reacts_to<caf::unpublish_atom, uint16_t>,
    caf::replies_to<caf::connect_atom, std::string, uint16_t>::with<published_actor>>;

}  // namespace kvferry
