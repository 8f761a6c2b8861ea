// The control plane over TLS (caf::openssl): mutual authentication against
// the cluster's CA, every published actor behind the process's gateway
// (gateway/gateway_actor.hpp), and the one way to publish or find an actor
// across processes that works with TLS on or off.
#pragma once

#include <chrono>
#include <cstdint>
#include <set>
#include <string>

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/expected.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>

#include "actors/gateway/gateway_actor.hpp"
#include "actors/process/caf_port_guard.hpp"
#include "actors/process/tls_files.hpp"
#include "messages/failure.hpp"

namespace kvferry {

/// An empty string when every file of `f` can be read, else what is wrong
/// ("the certificate /x/n0.pem cannot be read: No such file or directory").
std::string check_tls_files(const tls_files& f);

/// Loads caf::openssl::manager with `f`: every connection of the actor system
/// then authenticates both ends against f.cafile. Call after prepare() (the
/// middleman) and before the actor system is made from `cfg`.
void enable_tls(caf::actor_system_config& cfg, const tls_files& f);

/// True when `sys` runs its control plane over TLS.
inline bool tls_on(caf::actor_system& sys) {
  return sys.has_openssl_manager();
}

/// True for a host that only this machine can reach (127.0.0.0/8, ::1,
/// "localhost"): the one place kvferry listens without TLS quietly.
bool loopback_host(const std::string& host);

/// Publishes `whom` on `port` (0: any free one) of address `host`: over TLS
/// through the gateway, else on the middleman. Blocks; not for actors. The
/// port is guarded from then on (actors/process/caf_port_guard.hpp).
template <class Handle>
caf::expected<uint16_t> publish_actor(caf::actor_system& sys, const Handle& whom, uint16_t port,
                                      const std::string& host) {
  if (!tls_on(sys)) {
    auto actual = sys.middleman().publish(whom, port, host.c_str(), true);
    if (actual)
      guard_caf_port(*actual, false);
    return actual;
  }
  caf::scoped_actor self{sys};
  caf::expected<uint16_t> out{caf::error{}};
  self->request(gateway_of(sys), 2 * gateway_timeout, caf::publish_atom_v,
                caf::actor_cast<caf::strong_actor_ptr>(whom), sys.message_types(whom), port, host)
      .receive([&](uint16_t actual) { out = actual; }, [&](caf::error& err) { out = err; });
  if (out)
    guard_caf_port(*out, true);
  return out;
}

/// Withdraws what publish_actor published on `port`.
template <class Handle>
void unpublish_actor(caf::actor_system& sys, const Handle& whom, uint16_t port) {
  if (!tls_on(sys)) {
    sys.middleman().unpublish(whom, port);
    return;
  }
  caf::scoped_actor self{sys};  // a sender of this process: the gateway checks
  self->send(gateway_of(sys), caf::unpublish_atom_v, port);
}

/// Finds the actor published on host:port and checks its interface. Blocks
/// at most `timeout`; not for actors (they use resolve_published).
template <class Handle>
caf::expected<Handle> find_published(caf::actor_system& sys, const std::string& host, uint16_t port,
                                     caf::timespan timeout) {
  caf::scoped_actor self{sys};
  caf::expected<Handle> out{caf::error{}};
  auto check = [&](caf::strong_actor_ptr& ptr, const std::set<std::string>& ifs) {
    auto at = host + ":" + std::to_string(port);
    if (!ptr)
      out = make_error(errc::bootstrap_unreachable, "nothing is published at " + at);
    else if (!sys.assignable<Handle>(ifs))
      out = make_error(errc::bootstrap_unreachable,
                       "the actor published at " + at + " has another interface");
    else
      out = caf::actor_cast<Handle>(std::move(ptr));
  };
  auto fail = [&](caf::error& err) { out = err; };
  if (tls_on(sys))
    self->request(gateway_of(sys), timeout, caf::connect_atom_v, host, port)
        .receive([&](published_actor& found) { check(found.whom, found.interface); }, fail);
  else
    self->request(sys.middleman().actor_handle(), timeout, caf::connect_atom_v, host, port)
        .receive([&](const caf::node_id&, caf::strong_actor_ptr& ptr,
                     const std::set<std::string>& ifs) { check(ptr, ifs); },
                 fail);
  return out;
}

}  // namespace kvferry
