// A process's life token, as ranks tell it to their bootstrap or decider
// (actors/process/life_token.hpp has the token itself): a watcher on the same
// host learns of the holder's death within a millisecond, before its sockets
// close. And the notice a watcher's thread gives its own actor.
#pragma once

#include <string>

#include <caf/meta/type_name.hpp>

namespace kvferry {

/// Where a process's life token is: its host (boot id: only a process on
/// the same host looks) and the token's name there. Empty: none.
struct life_token_ref {
  std::string host;
  std::string name;

  bool empty() const { return name.empty(); }
  friend bool operator==(const life_token_ref&, const life_token_ref&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, life_token_ref& x) {
  return f(caf::meta::type_name("kvferry.life_token_ref"), x.host, x.name);
}

/// From a watch thread to the actor that watches (in-process only: it is in
/// no type-ID block, so no other process can send it: a node that gets it
/// over BASP cannot read it): the holder of token `name` died (`died`), or
/// ended in order.
struct life_ended {
  std::string name;
  bool died = true;
};

/// CAF wants every message type inspectable, sent across or not.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, life_ended& x) {
  return f(caf::meta::type_name("kvferry.life_ended"), x.name, x.died);
}

}  // namespace kvferry
