// Messages of a decode instance's decider: the one place per room that turns
// every participant's finish, or the first failure anyone reports, into the
// verdict all of them conclude with.
//
//   decode rank                decider                       prefill rank
//     │ member_registration ─▶ │  (once, at start)
//     │ room_join (room id, ─▶ │  first join draws the room's generation
//     │   prefill ranks)       │
//     │ ◀──────── room_keyed ─ │
//     │ room_finished ───────▶ │ ◀──────────── room_finished (its writes landed)
//     │ room_failure ────────▶ │ ◀──────────── room_failure (a fault it saw)
//     │ ◀──────── room_verdict │ room_verdict ─────────────▶ │  every participant, same words
//     │ room_leave ──────────▶ │  (cleared: the entry goes once every joined rank left)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "messages/failure.hpp"
#include "messages/handles.hpp"
#include "messages/ids.hpp"
#include "messages/life.hpp"

namespace kvferry {

/// Where the decode ranks of an instance find their decider: a handle in the
/// same process, or host:port through CAF's middleman.
struct decider_locator {
  decider_actor handle;
  std::string host;
  uint16_t port = 0;

  friend bool operator==(const decider_locator&, const decider_locator&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, decider_locator& x) {
  return f(caf::meta::type_name("kvferry.decider_locator"), x.handle, x.host, x.port);
}

/// A decode rank joins its instance's decider.
struct member_registration {
  rank_ref rank;
  decode_rank_actor handle;
  uint32_t tp_size = 1;
  uint32_t pp_size = 1;
  /// Its process's life token: a decider on the same host hears of the
  /// process's death within a millisecond (messages/life.hpp).
  life_token_ref life;

  friend bool operator==(const member_registration&, const member_registration&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, member_registration& x) {
  return f(caf::meta::type_name("kvferry.member_registration"), x.rank, x.handle, x.tp_size,
           x.pp_size, x.life);
}

/// Accepted: the decode instance's name and the generation of its incarnation.
struct member_ack {
  std::string instance;
  uint64_t instance_generation = 0;

  friend bool operator==(const member_ack&, const member_ack&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, member_ack& x) {
  return f(caf::meta::type_name("kvferry.member_ack"), x.instance, x.instance_generation);
}

/// A prefill rank that takes part in a room, as the decider reaches it.
struct participant {
  rank_ref rank;
  prefill_rank_actor handle;
  control_endpoint control;  ///< where its process is reached directly (see reach_peers)

  friend bool operator==(const participant&, const participant&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, participant& x) {
  return f(caf::meta::type_name("kvferry.participant"), x.rank, x.handle, x.control);
}

/// A decode rank's handshake with a prefill instance asks its decider to
/// connect to the processes of that instance's ranks (their control
/// endpoints) before any room names them: the decider then talks to them
/// over a connection it opened itself, never through a third process, and
/// no prefill process ever connects to a decode process (CAF's automatic
/// connections stay off: two processes that connect to each other at once
/// lose both connections). Answered once every endpoint was tried.
struct reach_peers {
  std::vector<participant> ranks;

  friend bool operator==(const reach_peers&, const reach_peers&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, reach_peers& x) {
  return f(caf::meta::type_name("kvferry.reach_peers"), x.ranks);
}

/// A decode rank opened room `room`; `prefill` names the prefill ranks of the
/// room once the rank's handshake with their instance is done (empty before).
struct room_join {
  uint64_t room = 0;
  rank_ref rank;
  std::vector<participant> prefill;

  friend bool operator==(const room_join&, const room_join&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, room_join& x) {
  return f(caf::meta::type_name("kvferry.room_join"), x.room, x.rank, x.prefill);
}

/// The decider's answer to a join: the room's key, with its generation.
struct room_keyed {
  room_key key;

  friend bool operator==(const room_keyed&, const room_keyed&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, room_keyed& x) {
  return f(caf::meta::type_name("kvferry.room_keyed"), x.key);
}

/// A participant finished its part of the room: a prefill rank once its
/// writes landed (a dummy once its scheduler sent the last chunk), a decode
/// rank once every source delivered and the aux row carries the room's stamp.
struct room_finished {
  room_key key;
  rank_ref rank;

  friend bool operator==(const room_finished&, const room_finished&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, room_finished& x) {
  return f(caf::meta::type_name("kvferry.room_finished"), x.key, x.rank);
}

/// A decode rank released the room (its scheduler cleared it).
struct room_leave {
  room_key key;
  rank_ref rank;

  friend bool operator==(const room_leave&, const room_leave&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, room_leave& x) {
  return f(caf::meta::type_name("kvferry.room_leave"), x.key, x.rank);
}

}  // namespace kvferry
