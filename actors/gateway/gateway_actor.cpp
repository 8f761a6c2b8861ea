#include "actors/gateway/gateway_actor.hpp"

#include <mutex>

#include <caf/actor_cast.hpp>
#include <caf/actor_registry.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/openssl/manager.hpp>

#include "actors/base/log.hpp"
#include "actors/gateway/peer_names.hpp"
#include "messages/failure.hpp"

namespace kvferry {

namespace {

using self_ptr = gateway_actor::stateful_pointer<gateway_state>;
using promise_type = caf::typed_response_promise<published_actor>;

const std::string label = "gateway";

caf::error unreachable(const std::string& what) {
  return make_error(errc::bootstrap_unreachable, what);
}

std::string at(const std::string& host, uint16_t port) {
  return host + ":" + std::to_string(port);
}

void resolve(self_ptr self, const std::string& host, uint16_t port, promise_type rp);

/// Lets the next lookup waiting for `host` go (after a connection to it was
/// made or failed).
void next_for(self_ptr self, const std::string& host) {
  auto& book = self->state.book;
  while (!book.connecting(host)) {
    auto w = book.next_waiting(host);
    if (!w)
      return;
    resolve(self, host, w->first, std::move(w->second));
  }
}

/// Asks the remote gateway `door` for what it published on `port`.
void ask(self_ptr self, const gateway_actor& door, const std::string& host, uint16_t port,
         promise_type rp, bool connected_now) {
  identity_proof proof;
  if (auto& me = self->state.me) {
    proof.certificate = me->certificate_pem();
    proof.signature = me->sign(
        node_identity::statement(caf::to_string(self->node()), caf::to_string(door.node())));
  }
  self->request(door, gateway_timeout, lookup_atom_v, port, std::move(proof))
      .then(
          [self, door, host, port, rp, connected_now](published_actor& found) mutable {
            if (connected_now) {
              self->state.book.learn(host, found.ports, door);
              auto addr = caf::actor_cast<caf::actor_addr>(door);
              if (self->state.monitored.insert(addr).second)
                self->monitor(door);
              self->state.book.done_connecting(host);
              next_for(self, host);
            }
            rp.deliver(std::move(found));
          },
          [self, host, port, rp, connected_now](caf::error& err) mutable {
            if (connected_now) {
              self->state.book.done_connecting(host);
              next_for(self, host);
            }
            rp.deliver(unreachable("the gateway at " + at(host, port) +
                                   " did not answer: " + self->system().render(err)));
          });
}

/// One lookup: through the known gateway of host:port, or through a new
/// connection (one at a time per host: a second connection to a process
/// breaks TLS messaging with it, and two ports of a host may be one process).
void resolve(self_ptr self, const std::string& host, uint16_t port, promise_type rp) {
  auto& book = self->state.book;
  if (auto door = book.door_at(host, port)) {
    ask(self, *door, host, port, std::move(rp), false);
    return;
  }
  if (book.connecting(host)) {
    if (!book.wait(host, port, rp))
      rp.deliver(unreachable("too many lookups wait for " + host + "; expected at most " +
                             std::to_string(book.max_waiting_per_host)));
    return;
  }
  book.start_connecting(host);
  auto mm = self->home_system().openssl_manager().actor_handle();
  self->request(mm, gateway_timeout, caf::connect_atom_v, host, port)
      .then(
          [self, host, port, rp](const caf::node_id&, caf::strong_actor_ptr& ptr,
                                 const std::set<std::string>& ifs) mutable {
            if (!ptr || !self->home_system().assignable<gateway_actor>(ifs)) {
              self->state.book.done_connecting(host);
              next_for(self, host);
              rp.deliver(unreachable(ptr ? "the actor at " + at(host, port) +
                                               " is not a kvferry gateway (a TLS peer of "
                                               "another kind)"
                                         : "nothing is published at " + at(host, port)));
              return;
            }
            ask(self, caf::actor_cast<gateway_actor>(std::move(ptr)), host, port, std::move(rp),
                true);
          },
          [self, host, port, rp](caf::error& err) mutable {
            self->state.book.done_connecting(host);
            next_for(self, host);
            rp.deliver(unreachable("cannot connect over TLS to " + at(host, port) + ": " +
                                   self->system().render(err)));
          });
}

/// A remote gateway looks up what is published on `port`: answered only
/// for a node that proves who it is with the cluster's certificates.
caf::result<published_actor> on_lookup(self_ptr self, uint16_t port, identity_proof& proof) {
  auto& st = self->state;
  auto sender = self->current_sender();
  if (!st.me)
    return unreachable("this gateway cannot check who looks up: " + st.identity_error);
  if (!sender)
    return unreachable("an anonymous lookup; expected one from a remote gateway");
  auto checked = st.me->verify(
      proof.certificate, proof.signature,
      node_identity::statement(caf::to_string(sender->node()), caf::to_string(self->node())));
  if (!checked.ok) {
    drop_stranger(self, label, "a lookup that proves no node (" + checked.name_or_error + ")");
    return unreachable("lookup refused: " + checked.name_or_error);
  }
  if (sender->node() != self->node())
    remember_node_name(sender->node(), checked.name_or_error);
  auto* e = self->state.book.published_on(port);
  if (!e)
    return unreachable("nothing is published on port " + std::to_string(port) + " of this process");
  return published_actor{e->whom, e->interface, self->state.book.ports()};
}

/// This process publishes `whom` (with interfaces `ifs`) on `port` of
/// `host`, through the TLS middleman.
caf::result<uint16_t> on_publish(self_ptr self, caf::strong_actor_ptr whom,
                                 std::set<std::string> ifs, uint16_t port, std::string host) {
  if (!from_this_process(self, label, "a publish"))
    return unreachable("publish is for the gateway's own process");
  if (!whom)
    return unreachable("cannot publish an invalid actor");
  if (port != 0 && self->state.book.publishes(port))
    return unreachable("port " + std::to_string(port) + " is already published");
  auto rp = self->make_response_promise<uint16_t>();
  auto mm = self->home_system().openssl_manager().actor_handle();
  auto me = caf::actor_cast<caf::strong_actor_ptr>(self);
  self->request(mm, gateway_timeout, caf::publish_atom_v, port, me,
                self->home_system().message_types<gateway_actor>(), host, true)
      .then(
          [self, rp, whom, ifs](uint16_t actual) mutable {
            self->state.book.publish(actual, gateway_state::entry{whom, ifs});
            rp.deliver(actual);
          },
          [rp](caf::error& err) mutable { rp.deliver(std::move(err)); });
  return rp;
}

/// Loads this node's identity and watches the TLS middleman: the gateway
/// goes with it (a remote gateway's proxy that outlives its middleman
/// crashes the process as it is destroyed).
void start_gateway(self_ptr self) {
  auto mm = self->home_system().openssl_manager().actor_handle();
  self->monitor(mm);
  auto& cfg = self->home_system().config();
  self->state.me = node_identity::load(tls_files{cfg.openssl_certificate, cfg.openssl_key,
                                                 cfg.openssl_cafile, cfg.openssl_passphrase},
                                       self->state.identity_error);
  if (self->state.me)
    set_own_node_name(self->state.me->name());
  else
    log().error("gateway: {}; every lookup through this process fails", self->state.identity_error);
  self->set_down_handler(
      [self, mm = caf::actor_cast<caf::actor_addr>(mm)](const caf::down_msg& dm) {
        if (dm.source == mm) {
          self->state.book = {};
          self->state.monitored.clear();
          self->quit();
          return;
        }
        self->state.monitored.erase(dm.source);
        self->state.book.forget(caf::actor_cast<gateway_actor>(dm.source));
      });
}

}  // namespace

gateway_actor::behavior_type gateway(self_ptr self) {
  start_gateway(self);
  return {
      [self](lookup_atom, uint16_t port, identity_proof& proof) -> caf::result<published_actor> {
        return on_lookup(self, port, proof);
      },
      [self](caf::publish_atom, caf::strong_actor_ptr whom, std::set<std::string> ifs,
             uint16_t port, std::string host) -> caf::result<uint16_t> {
        return on_publish(self, std::move(whom), std::move(ifs), port, std::move(host));
      },
      [self](caf::unpublish_atom, uint16_t port) {
        if (!from_this_process(self, label, "an unpublish") || !self->state.book.publishes(port))
          return;
        self->state.book.unpublish(port);
        auto mm = self->home_system().openssl_manager().actor_handle();
        self->send(mm, caf::unpublish_atom_v, caf::actor_cast<caf::actor_addr>(self), port);
      },
      [self](caf::connect_atom, std::string host, uint16_t port) -> caf::result<published_actor> {
        if (!from_this_process(self, label, "a connect"))
          return unreachable("connect is for the gateway's own process");
        auto rp = self->make_response_promise<published_actor>();
        resolve(self, host, port, rp);
        return rp;
      },
  };
}

gateway_actor gateway_of(caf::actor_system& sys) {
  static std::mutex mu;
  std::lock_guard<std::mutex> guard{mu};
  auto key = caf::atom("kvf_gate");
  if (auto found = sys.registry().get<gateway_actor>(key))
    return found;
  // Hidden: the actor system's end does not wait for it (it lives as long
  // as the system, like the middleman's own actors).
  auto gw = sys.spawn<caf::hidden>(gateway);
  sys.registry().put(key, gw);
  return gw;
}

}  // namespace kvferry
