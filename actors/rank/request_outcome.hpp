// What a prefill rank does with a decode rank's request for a room its
// scheduler opened, as a value: the policy of prefill_peers' handle_request
// (tombstones, generations, a concluded room, a dead instance, an
// unregistered peer, bind), taking the facts and knowing nothing of CAF.
// The actor's step only does what the value says (issue 33, step 1).
#pragma once

#include <optional>

#include "messages/failure.hpp"
#include "messages/ids.hpp"
#include "messages/kv_poll.hpp"
#include "messages/room.hpp"

namespace kvferry {

/// What the rank knows when a request arrives.
struct request_facts {
  room_key room;  ///< the open room's key; generation 0 until a request binds it
  kv_poll state = kv_poll::bootstrapping;  ///< the room's state here
  failure concluded_why;                   ///< why it concluded, when Failed
  /// The outcome of a cleared room of exactly the request's key (looked up
  /// only while the open room is unbound): the request is that room's.
  const room_verdict* cleared = nullptr;
  std::optional<failure> instance_down;  ///< a rank of this instance is gone
  bool peer_registered = false;          ///< the requesting decode rank registered its layout here
  rank_ref self;                         ///< this rank, for the causes it words
};

/// What to do with the request.
struct request_outcome {
  enum class action : uint8_t {
    ignore,        ///< nothing: it concerns a room that concluded Success
    tell_decider,  ///< the request's decider hears `why`; the open room is untouched
    report,        ///< the room fails here with `why` (its decider noted first)
    bind,          ///< bind the request (its decider noted first)
  };
  action what = action::ignore;
  failure why;

  friend bool operator==(const request_outcome&, const request_outcome&) = default;
};

/// Judges `req` against `facts`, in this order: a request of a cleared room
/// (its failure is repeated, its success ignored); a room concluded here
/// (Failed: its cause, whatever key the decider gives it; Success: ignored);
/// another incarnation of the id live here (duplicate_room, the newcomer
/// only); then, for the room itself, a dead instance, an unregistered peer,
/// or bind.
request_outcome judge_request(const request_facts& facts, const room_request& req);

}  // namespace kvferry
