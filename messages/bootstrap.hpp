// Messages of the bootstrap: prefill ranks register, decode ranks look the
// topology up. No KV passes through it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "messages/failure.hpp"
#include "messages/handles.hpp"
#include "messages/ids.hpp"
#include "messages/layout.hpp"
#include "messages/life.hpp"

namespace kvferry {

/// Where a decode rank finds the bootstrap of a prefill instance: a handle in
/// the same process (tests, embedded demo), or host:port through CAF's
/// middleman. With DP attention one bootstrap serves every DP group of an
/// instance, each a directory of its own: `dp_group` names the group.
struct bootstrap_locator {
  /// `dp_group` of a plain instance (no DP groups): the bootstrap itself.
  static constexpr uint32_t whole = 0xFFFFFFFF;
  /// The most DP groups one bootstrap serves.
  static constexpr uint32_t max_dp_groups = 1024;

  bootstrap_actor handle;  ///< set: use it directly; unset: connect to host:port
  std::string host;
  uint16_t port = 0;
  uint32_t dp_group = whole;  ///< the DP group behind the bootstrap (`whole`: none)
  uint32_t dp_size = 0;       ///< the instance's DP groups, as the holder knows (0: not known)

  bool has_dp_group() const { return dp_group != whole; }

  /// A stable name for the instance behind it: "127.0.0.1:8998",
  /// "127.0.0.1:8998/dp2" or "local:<actor id>".
  std::string key() const;

  friend bool operator==(const bootstrap_locator&, const bootstrap_locator&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, bootstrap_locator& x) {
  return f(caf::meta::type_name("kvferry.bootstrap_locator"), x.handle, x.host, x.port, x.dp_group,
           x.dp_size);
}

/// A prefill rank joins its instance's directory.
struct rank_registration {
  rank_ref rank;
  prefill_rank_actor handle;
  std::string data_endpoint;  ///< where its transport connects from (informative)
  kv_layout layout;
  uint32_t tp_size = 1;  ///< TP size of the instance, as this rank knows it
  uint32_t pp_size = 1;  ///< PP size of the instance
  /// Where its actor is published, for decode processes and deciders to
  /// connect to it directly (not published: reach it through the handle).
  control_endpoint control;
  /// This rank's own incarnation (drawn when it starts): a restarted rank
  /// process registers again under the same (tp, pp) with a newer one.
  uint64_t rank_generation = 0;
  /// Its process's life token: a bootstrap on the same host hears of the
  /// process's death within a millisecond (messages/life.hpp).
  life_token_ref life;

  friend bool operator==(const rank_registration&, const rank_registration&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, rank_registration& x) {
  return f(caf::meta::type_name("kvferry.rank_registration"), x.rank, x.handle, x.data_endpoint,
           x.layout, x.tp_size, x.pp_size, x.control, x.rank_generation, x.life);
}

/// Accepted: the name and generation of the instance incarnation this rank belongs to.
struct registration_ack {
  std::string instance;
  uint64_t instance_generation = 0;

  friend bool operator==(const registration_ack&, const registration_ack&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, registration_ack& x) {
  return f(caf::meta::type_name("kvferry.registration_ack"), x.instance, x.instance_generation);
}

/// The bootstrap saw one of its ranks go (its actor terminated, or its node's
/// connection dropped). Sent to every decode rank that looked the instance
/// up: such a rank may reach the prefill rank only through another node, and
/// then CAF tells it nothing when that rank's process dies.
struct rank_left {
  rank_ref rank;
  std::string reason;
  bool orderly = false;  ///< it stopped on purpose (user_shutdown), not a fault
  /// Its connection was lost (remote_link_unreachable): it may live on, cut off.
  bool link_lost = false;
  /// When the bootstrap saw it go (system clock, ns since the Unix epoch): one
  /// value every rank that words the instance's death reads alike.
  int64_t left_at_ns = 0;
  /// Where the bootstrap is published ("host:port"; empty when it is not known).
  std::string bootstrap;

  friend bool operator==(const rank_left&, const rank_left&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, rank_left& x) {
  return f(caf::meta::type_name("kvferry.rank_left"), x.rank, x.reason, x.orderly, x.link_lost,
           x.left_at_ns, x.bootstrap);
}

/// Who serves a prefill instance now.
struct topology {
  std::string instance;
  uint64_t instance_generation = 0;
  uint32_t tp_size = 0;
  uint32_t pp_size = 0;
  std::vector<rank_registration> ranks;  ///< registered so far, ordered by (pp, tp)
  /// Ranks that registered and left, and have not registered again: while
  /// there is one, the instance is dead (it cannot serve a room).
  std::vector<rank_left> departed;
  std::string bootstrap;  ///< where the bootstrap is published, "host:port" ("" unknown)

  /// True once every rank of tp_size x pp_size has registered.
  bool complete() const { return tp_size > 0 && ranks.size() == size_t{tp_size} * pp_size; }
  /// True while a rank that registered is gone.
  bool dead() const { return !departed.empty(); }

  friend bool operator==(const topology&, const topology&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, topology& x) {
  return f(caf::meta::type_name("kvferry.topology"), x.instance, x.instance_generation, x.tp_size,
           x.pp_size, x.ranks, x.departed, x.bootstrap);
}

/// DP attention without follow_bootstrap_room: a decode rank asks the
/// instance's bootstrap which DP group serves each of `rooms`.
struct room_dp_query {
  std::vector<uint64_t> rooms;

  friend bool operator==(const room_dp_query&, const room_dp_query&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, room_dp_query& x) {
  return f(caf::meta::type_name("kvferry.room_dp_query"), x.rooms);
}

/// The answer: the rooms whose group a prefill rank registered, each with
/// its group (same length, in the order asked; rooms not known are absent).
struct room_dp_groups {
  std::vector<uint64_t> rooms;
  std::vector<uint32_t> groups;

  friend bool operator==(const room_dp_groups&, const room_dp_groups&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, room_dp_groups& x) {
  return f(caf::meta::type_name("kvferry.room_dp_groups"), x.rooms, x.groups);
}

/// The failure of a room that needs prefill instance `instance` (incarnation
/// `generation`) while `gone` is missing from it. Built from the bootstrap's
/// record alone, so that every rank of both instances words it alike:
/// "prefill instance prefill-1 (bootstrap 10.0.0.5:8998) is dead: prefill-1
/// tp1 pp0 left at 2026-12-01 12:00:01.234 UTC: its process or its link was
/// lost (remote_link_unreachable)". Origin: the whole instance.
failure instance_dead(const std::string& instance, uint64_t generation, const rank_left& gone);

/// The failure of a room that needs the instance of dead topology `t`: its
/// earliest departure (by time, then place), so that every rank that sees
/// the same topology names the same one. Nullopt while `t` is not dead.
std::optional<failure> instance_dead(const topology& t);

/// True when every departure `t` records was an orderly stop (a shutdown at
/// the end of a run: news, not a fault).
bool departed_orderly(const topology& t);

}  // namespace kvferry
