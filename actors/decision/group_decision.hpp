// The group decision of one room: it is Success only when every participating
// rank has finished, and Failed with the first reported failure otherwise.
// Decided once; later reports change nothing. Plain logic, owned by the
// room's decider.
#pragma once

#include <optional>
#include <set>

#include "messages/failure.hpp"
#include "messages/ids.hpp"
#include "messages/kv_poll.hpp"

namespace kvferry {

/// The outcome every participant concludes with.
struct verdict {
  kv_poll outcome = kv_poll::failed;  ///< Success or Failed
  failure why;                        ///< set when Failed
};

class group_decision {
 public:
  /// Adds a participant that must finish before Success. Ignored once decided.
  void add_participant(const rank_ref& participant);

  /// `participant` finished its part. Returns the verdict when this completes
  /// the group; nullopt otherwise (others pending, unknown participant, or
  /// already decided).
  std::optional<verdict> finish(const rank_ref& participant);

  /// A failure was reported. Returns the verdict if it decides the room (the
  /// first failure before any decision); nullopt if already decided.
  std::optional<verdict> fail(failure why);

  bool decided() const { return decided_.has_value(); }
  const std::optional<verdict>& outcome() const { return decided_; }
  const std::set<rank_ref>& participants() const { return participants_; }
  const std::set<rank_ref>& finished() const { return finished_; }

 private:
  std::set<rank_ref> participants_;
  std::set<rank_ref> finished_;
  std::optional<verdict> decided_;
};

}  // namespace kvferry
