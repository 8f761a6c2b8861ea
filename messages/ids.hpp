// Identities that cross every layer of kvferry: which request (room_key) and
// which rank (rank_ref). Every room message starts with a room_key; every
// failure names the rank_ref it came from.
#pragma once

#include <compare>
#include <cstdint>
#include <string>

#include <caf/meta/type_name.hpp>

namespace kvferry {

/// One request's transfer. `room` is the 64-bit id the router gives both
/// instances; `generation` is added by the decode rank that opens the room, so
/// that a reused id never matches a stale message of an earlier incarnation.
/// Generation 0 means "not bound yet" (a prefill room before its request).
struct room_key {
  uint64_t room = 0;
  uint64_t generation = 0;

  friend auto operator<=>(const room_key&, const room_key&) = default;
};

/// "room 42#7", or "room 42" while unbound.
std::string to_string(const room_key& x);

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, room_key& x) {
  return f(caf::meta::type_name("kvferry.room_key"), x.room, x.generation);
}

/// Which side of the disaggregation a rank serves.
enum class role : uint8_t { prefill = 0, decode = 1 };

std::string to_string(role x);

/// One rank of one instance incarnation. Two incarnations of the same instance
/// (a restart) differ in `instance_generation`.
struct rank_ref {
  role side = role::prefill;
  std::string instance;              ///< instance name, e.g. "prefill-0"
  uint64_t instance_generation = 0;  ///< issued by the bootstrap (prefill) or at start (decode)
  uint32_t tp = 0;                   ///< tensor-parallel rank
  uint32_t pp = 0;                   ///< pipeline-parallel stage

  /// tp and pp of a reference to a whole instance (or its decider), not one rank.
  static constexpr uint32_t whole = UINT32_MAX;

  bool names_instance() const { return tp == whole && pp == whole; }

  friend auto operator<=>(const rank_ref&, const rank_ref&) = default;
};

/// True when `a` and `b` are the same place (side, instance, tp, pp),
/// whatever generations they name: a rank's own actors name it before its
/// generation is known.
inline bool same_place(const rank_ref& a, const rank_ref& b) {
  return a.side == b.side && a.instance == b.instance && a.tp == b.tp && a.pp == b.pp;
}

/// The whole instance `instance` of side `side`: the origin of a failure that
/// no single rank caused (its decider went silent, no peer ever asked).
inline rank_ref instance_ref(role side, std::string instance, uint64_t generation) {
  return rank_ref{side, std::move(instance), generation, rank_ref::whole, rank_ref::whole};
}

/// "prefill-0 tp1 pp0"; "instance prefill-0" for a whole instance (the
/// generation is left out; it is in the logs of the bootstrap).
std::string to_string(const rank_ref& x);

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, rank_ref& x) {
  return f(caf::meta::type_name("kvferry.rank_ref"), x.side, x.instance, x.instance_generation,
           x.tp, x.pp);
}

/// Where an actor of another process is published on a port of its own, so
/// that a peer connects to that process directly (one connection, opened by
/// the decode side) instead of reaching it through a third process. Port 0:
/// not published (the actor lives in the same process as whoever hands its
/// handle out, or in this one).
struct control_endpoint {
  std::string host;
  uint16_t port = 0;

  bool published() const { return port != 0; }
  /// "127.0.0.1:41234", "[::1]:41234"; "-" when not published.
  std::string key() const;

  friend auto operator<=>(const control_endpoint&, const control_endpoint&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, control_endpoint& x) {
  return f(caf::meta::type_name("kvferry.control_endpoint"), x.host, x.port);
}

}  // namespace kvferry
