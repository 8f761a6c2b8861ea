// What a room_join does to its room beyond keying it: the first cause that
// fails the room at once, if any, and whether the decider's lease is checked
// before that cause is given. A plain value over the facts the decider holds
// (decider_actor.cpp's on_join gathers them and does what the value says);
// its namesake test walks every branch.
#pragma once

namespace kvferry {

/// Why a join fails its room at once.
enum class join_failure {
  none,
  /// A new room beyond the instance's admission limit (kvferry.max-rooms).
  overloaded,
  /// A member of the instance is down or lost and not back.
  member_missing,
  /// A prefill rank the join names is declared lost.
  prefill_lost,
  /// A prefill rank the join names reported a failure of the room before
  /// the join that names it came in.
  reported_before,
};

struct join_facts {
  bool decided = false;             ///< the room was decided before this join
  bool new_room = false;            ///< this join keys the room
  bool at_admission_limit = false;  ///< undecided rooms already at the limit
  bool member_missing = false;
  bool prefill_lost = false;
  bool reported_before = false;
};

struct join_effects {
  join_failure fail_with = join_failure::none;
  /// Check the lease first: a participant that may have declared the
  /// decider lost makes the verdict that cause instead (decider_peers.cpp's
  /// lapsed). Not for a refusal at admission: the room never ran.
  bool lease_first = false;

  friend bool operator==(const join_effects&, const join_effects&) = default;
};

/// The effects of a join: a decided room only learns its verdict; a new
/// room beyond the limit is refused; otherwise a missing member, then a lost
/// prefill rank, then an earlier report fails it, in that order of
/// precedence (the first names the widest cause); else it waits.
join_effects judge_join(const join_facts& f);

/// "overloaded", "member_missing", ...
const char* to_string(join_failure f);

}  // namespace kvferry
