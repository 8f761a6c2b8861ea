// kvferry's one failure vocabulary. Every fault, wherever it is seen, becomes a
// `failure` {code, cause, origin}; the room's decider turns the first one into
// the verdict every participating rank concludes with.
//
// Codes are grouped by what they take down, like UCX's status ranges:
//   1..63    one room       (bad input, deadline, abort, a failed write)
//   64..127  one peer rank  (its actor died, its connection dropped)
//   128..    an instance    (restarted, shutting down)
// The cause names the value and what was expected:
//   "layout mismatch: page_size prefill=16 decode=64".
#pragma once

#include <cstdint>
#include <string>

#include <caf/atom.hpp>
#include <caf/error.hpp>
#include <caf/exit_reason.hpp>
#include <caf/fwd.hpp>
#include <caf/meta/type_name.hpp>

#include "messages/ids.hpp"

namespace kvferry {

/// Failure codes. Pick the most specific; the cause carries the values.
enum class errc : uint8_t {
  none = 0,

  // -- one room ---------------------------------------------------------------

  /// A layout field differs between prefill and decode (refused at handshake).
  layout_mismatch = 1,
  /// A page index or page count is out of range or inconsistent.
  invalid_pages = 2,
  /// A chunk breaks the room's sequence: sent before init, past num_pages,
  /// after the last chunk, or a last chunk that ends early.
  invalid_chunk = 3,
  /// A message names a room this rank does not have open.
  unknown_room = 4,
  /// A room id that is already open on this rank was opened again.
  duplicate_room = 5,
  /// A room stayed in one non-terminal state past its deadline.
  deadline = 6,
  /// The scheduler of one side aborted the room.
  aborted = 7,
  /// The aux row does not carry the room's stamp: corruption or a slot collision.
  aux_mismatch = 8,
  /// The data plane failed a write of this room (see the cause for the backend's words).
  transfer_failed = 9,
  /// A write fell outside the registered regions of its target.
  out_of_bounds = 10,
  /// The two instances' configurations cannot be combined (refused at handshake).
  unsupported = 11,
  /// An exception escaped a handler while it worked on this room.
  internal = 12,
  /// A room or rank parameter is invalid (aux slot out of range, init twice...).
  invalid_argument = 13,
  /// A staged chunk does not fit the decode rank's staging ring.
  staging_oversized = 14,
  /// A rank refused a new room because it already holds as many as it admits
  /// at once (the cause names its limit): the room is refused, not lost.
  overloaded = 15,
  /// The KV bytes that landed do not hash to what the sender computed over
  /// what it wrote (end-to-end KV checksums; the cause names the page, the
  /// buffer and the rank that checked).
  checksum_mismatch = 16,

  // -- one peer rank ----------------------------------------------------------

  /// The peer rank's actor terminated or its node's connection dropped.
  peer_down = 64,
  /// The peer stopped answering heartbeats (a silent partition).
  heartbeat_lost = 65,
  /// The data plane could not connect to the peer's endpoint.
  connect_failed = 66,
  /// The bootstrap of the peer instance could not be reached or queried.
  bootstrap_unreachable = 67,
  /// The data-plane connection to the peer dropped with a write in flight, or
  /// the peer spoke something else: the link failed, not the room.
  link_lost = 68,

  // -- an instance ------------------------------------------------------------

  /// The peer instance restarted; rooms of its old incarnation are gone.
  instance_restarted = 128,
  /// This rank is shutting down.
  shut_down = 129,
  /// A rank of the peer instance left and has not come back: the instance
  /// cannot serve rooms until it does (new rooms fail at once).
  instance_dead = 130,
  /// A decode rank of the room's own instance is down (killed, lost by
  /// heartbeats) and has not registered again: every room of the instance
  /// needs it, so new rooms fail at once until it is back.
  instance_incomplete = 131,
};

/// What a failure takes down.
enum class failure_scope : uint8_t { none, room, peer, instance };

/// The scope of `code`, from its range.
failure_scope scope_of(errc code);

/// "layout_mismatch", "deadline", ...
std::string to_string(errc code);

/// "room", "peer", "instance".
std::string to_string(failure_scope scope);

/// One fault: what happened, in words that name the values, and the rank that
/// saw it first. Sent unchanged to every rank of a room.
struct failure {
  errc code = errc::none;
  std::string cause;
  rank_ref origin;

  explicit operator bool() const { return code != errc::none; }
  friend bool operator==(const failure&, const failure&) = default;
};

/// "deadline: room 42#7 stayed in WaitingForInput past its 30s deadline (from decode-0 tp0 pp0)".
std::string to_string(const failure& x);

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, failure& x) {
  return f(caf::meta::type_name("kvferry.failure"), x.code, x.cause, x.origin);
}

/// What a scheduler gets for a failed room (SGLang's KVTransferError): the
/// room, the cause and the rank it came from. Never "unknown reason".
struct transfer_error {
  room_key room;
  failure why;

  /// "KVTransferError(room 42#7): deadline: ... (from decode-0 tp0 pp0)".
  std::string what() const;
};

// -- caf::error glue ----------------------------------------------------------

/// The error category of kvferry's codes inside caf::error.
constexpr caf::atom_value error_category = caf::atom("kvferry");

/// True where a down_msg's `reason` says the connection to the actor's node
/// was lost (its process killed, the link cut) rather than the actor ending:
/// it may live on, cut off, and conclude on its own side of the cut.
inline bool link_lost(const caf::error& reason) {
  return reason == caf::exit_reason::remote_link_unreachable;
}

/// Wraps a code and cause into a caf::error (category "kvferry").
caf::error make_error(errc code, std::string cause);

/// Wraps a whole failure (cause and origin) into a caf::error.
caf::error to_error(const failure& x);

/// Reads a caf::error back into a failure. Errors of other categories become
/// `internal` with CAF's rendering of the error as cause, and `fallback_origin`.
failure to_failure(const caf::error& err, const rank_ref& fallback_origin);

/// Renders errors of category "kvferry" for actor_system::render:
/// "kvferry.deadline: <cause> (from <origin>)".
std::string render_error(uint8_t code, caf::atom_value category, const caf::message& context);

}  // namespace kvferry
