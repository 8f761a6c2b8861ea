// Finding an actor another node published (a prefill instance's bootstrap, a
// decode instance's decider) from inside an actor, without blocking it: a
// handle given in the locator is used as is; host:port goes through the
// middleman actor's asynchronous connect, with a timeout (CAF's blocking
// remote_actor() can hang forever on a frozen peer), and the published
// actor's interface is checked against the handle type.
#pragma once

#include <chrono>
#include <set>
#include <string>

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/expected.hpp>
#include <caf/io/middleman.hpp>
#include <caf/node_id.hpp>

#include "messages/failure.hpp"

namespace kvferry {

/// Calls `done(caf::expected<Handle>)` once, from `self`'s context. `what`
/// names the actor in errors ("bootstrap", "decider").
template <class Handle, class Self, class Done>
void resolve_published(Self* self, Handle direct, const std::string& host, uint16_t port,
                       caf::timespan timeout, std::string what, Done done) {
  if (direct) {
    done(caf::expected<Handle>{direct});
    return;
  }
  auto key = what + " " + host + ":" + std::to_string(port);
  auto& sys = self->home_system();
  if (!sys.has_middleman()) {
    done(caf::expected<Handle>{make_error(
        errc::bootstrap_unreachable, key + " is remote but this actor system has no middleman")});
    return;
  }
  auto mm = sys.middleman().actor_handle();
  self->request(mm, timeout, caf::connect_atom::value, host, port)
      .then(
          [self, key, done](const caf::node_id&, caf::strong_actor_ptr& ptr,
                            const std::set<std::string>& ifs) mutable {
            if (!ptr) {
              done(caf::expected<Handle>{
                  make_error(errc::bootstrap_unreachable, "nothing is published as " + key)});
              return;
            }
            if (!self->home_system().template assignable<Handle>(ifs)) {
              done(caf::expected<Handle>{
                  make_error(errc::bootstrap_unreachable,
                             "the actor published as " + key + " has another interface")});
              return;
            }
            done(caf::expected<Handle>{caf::actor_cast<Handle>(std::move(ptr))});
          },
          [key, done](caf::error& err) mutable {
            done(caf::expected<Handle>{
                make_error(errc::bootstrap_unreachable, key + ": " + caf::to_string(err))});
          });
}

}  // namespace kvferry
