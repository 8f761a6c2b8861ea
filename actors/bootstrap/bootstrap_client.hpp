// Finding a prefill instance's bootstrap from inside an actor, without
// blocking it: a handle in the locator is used as is; host:port goes through
// the middleman actor's asynchronous connect, with a timeout (CAF's blocking
// remote_actor() can hang forever on a frozen peer).
#pragma once

#include <chrono>
#include <functional>
#include <set>
#include <string>

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/expected.hpp>
#include <caf/io/middleman.hpp>
#include <caf/node_id.hpp>

#include "messages/bootstrap.hpp"
#include "messages/failure.hpp"

namespace kvferry {

/// Calls `done(caf::expected<bootstrap_actor>)` once, from `self`'s context.
template <class Self, class Done>
void resolve_bootstrap(Self* self, const bootstrap_locator& where, caf::timespan timeout,
                       Done done) {
  if (where.handle) {
    done(caf::expected<bootstrap_actor>{where.handle});
    return;
  }
  auto& sys = self->home_system();
  if (!sys.has_middleman()) {
    done(caf::expected<bootstrap_actor>{make_error(
        errc::bootstrap_unreachable,
        "bootstrap " + where.key() + " is remote but this actor system has no middleman loaded")});
    return;
  }
  auto key = where.key();
  auto mm = sys.middleman().actor_handle();
  self->request(mm, timeout, caf::connect_atom::value, where.host, where.port)
      .then(
          [self, key, done](const caf::node_id&, caf::strong_actor_ptr& ptr,
                            const std::set<std::string>& ifs) mutable {
            if (!ptr) {
              done(caf::expected<bootstrap_actor>{
                  make_error(errc::bootstrap_unreachable, "no actor is published at " + key)});
              return;
            }
            if (!self->home_system().template assignable<bootstrap_actor>(ifs)) {
              done(caf::expected<bootstrap_actor>{
                  make_error(errc::bootstrap_unreachable,
                             "the actor published at " + key +
                                 " is not a kvferry bootstrap (other interface)")});
              return;
            }
            done(caf::expected<bootstrap_actor>{caf::actor_cast<bootstrap_actor>(std::move(ptr))});
          },
          [key, done](caf::error& err) mutable {
            done(caf::expected<bootstrap_actor>{make_error(
                errc::bootstrap_unreachable, "bootstrap " + key + ": " + caf::to_string(err))});
          });
}

}  // namespace kvferry
