// Finding an actor another node published (a prefill instance's bootstrap, a
// decode instance's decider) from inside an actor, without blocking it: a
// handle given in the locator is used as is; host:port goes through the
// middleman actor's asynchronous connect, with a timeout (CAF's blocking
// remote_actor() can hang forever on a frozen peer), and the published
// actor's interface is checked against the handle type. Under TLS the lookup
// goes through this process's gateway instead (actors/gateway/tls.hpp).
#pragma once

#include <chrono>
#include <set>
#include <string>

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/expected.hpp>
#include <caf/io/middleman.hpp>
#include <caf/node_id.hpp>

#include "actors/gateway/gateway_actor.hpp"
#include "messages/bootstrap.hpp"
#include "messages/failure.hpp"
#include "messages/handles.hpp"

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
  auto found = [self, key, done](caf::strong_actor_ptr ptr,
                                 const std::set<std::string>& ifs) mutable {
    if (!ptr)
      done(caf::expected<Handle>{
          make_error(errc::bootstrap_unreachable, "nothing is published as " + key)});
    else if (!self->home_system().template assignable<Handle>(ifs))
      done(caf::expected<Handle>{
          make_error(errc::bootstrap_unreachable,
                     "the actor published as " + key + " has another interface")});
    else
      done(caf::expected<Handle>{caf::actor_cast<Handle>(std::move(ptr))});
  };
  auto failed = [key, done](caf::error& err) mutable {
    done(caf::expected<Handle>{
        make_error(errc::bootstrap_unreachable, key + ": " + caf::to_string(err))});
  };
  if (sys.has_openssl_manager())
    self->request(gateway_of(sys), timeout, caf::connect_atom_v, host, port)
        .then([found](published_actor& p) mutable { found(std::move(p.whom), p.interface); },
              failed);
  else
    self->request(sys.middleman().actor_handle(), timeout, caf::connect_atom::value, host, port)
        .then([found](const caf::node_id&, caf::strong_actor_ptr& ptr,
                      const std::set<std::string>& ifs) mutable { found(std::move(ptr), ifs); },
              failed);
}

/// The bootstrap `loc` names: the published one, or, where `loc` names a DP
/// group, that group's bootstrap, asked of the published one. Calls
/// `done(caf::expected<bootstrap_actor>)` once, from `self`'s context.
template <class Self, class Done>
void resolve_bootstrap(Self* self, const bootstrap_locator& loc, caf::timespan timeout, Done done) {
  resolve_published<bootstrap_actor>(
      self, loc.handle, loc.host, loc.port, timeout, "bootstrap",
      [self, loc, timeout, done](caf::expected<bootstrap_actor> found) mutable {
        if (!found || !loc.has_dp_group()) {
          done(std::move(found));
          return;
        }
        auto key = "bootstrap " + loc.key();
        self->request(*found, timeout, dp_group_atom_v, loc.dp_group, loc.dp_size)
            .then(
                [done, key](caf::strong_actor_ptr& ptr) mutable {
                  auto group = caf::actor_cast<bootstrap_actor>(std::move(ptr));
                  if (!group)
                    done(caf::expected<bootstrap_actor>{
                        make_error(errc::bootstrap_unreachable, key + ": no such DP group")});
                  else
                    done(caf::expected<bootstrap_actor>{std::move(group)});
                },
                [self, done, key](caf::error& err) mutable {
                  done(caf::expected<bootstrap_actor>{make_error(
                      errc::bootstrap_unreachable, key + ": " + self->system().render(err))});
                });
      });
}

}  // namespace kvferry
