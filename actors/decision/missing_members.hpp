// The members of a decode instance that are missing: a decode rank that went
// down (its actor or its process ended, its link dropped) or was declared lost
// by heartbeats, and has not registered again or answered since. Every room of
// the instance needs every member, so while one is missing a room cannot
// succeed: new rooms fail at once with one cause (instance_incomplete) that
// names the missing rank, when it went and how, instead of waiting for a join
// that will not come. Plain logic behind the decider actor.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "messages/failure.hpp"
#include "messages/ids.hpp"

namespace kvferry {

/// The cause of every room of decode instance `gone.instance` while member
/// `gone` is missing: "decode instance decode-0 is incomplete: decode-0 tp1
/// pp0 went down at 2026-12-03 08:44:49.351 UTC (how); its rooms fail until it
/// is back". Origin: the missing rank.
failure instance_incomplete(const rank_ref& gone, const std::string& how, int64_t at_ns);

class missing_members {
 public:
  /// Member `rank` went at wall time `at_ns` (ns since the Unix epoch),
  /// `how` in words. A member already missing keeps its first cause.
  const failure& went(const rank_ref& rank, const std::string& how, int64_t at_ns) {
    auto [i, fresh] = missing_.try_emplace(place(rank));
    if (fresh)
      i->second = {instance_incomplete(rank, how, at_ns), at_ns};
    return i->second.why;
  }

  /// Member `rank` is back (registered again, answered, joined). True when
  /// it was missing.
  bool back(const rank_ref& rank) { return missing_.erase(place(rank)) > 0; }

  bool missing(const rank_ref& rank) const { return missing_.count(place(rank)) > 0; }

  /// The cause rooms fail with now: the member missing longest (then the
  /// lowest place), so that every room of the same outage reads alike.
  /// nullptr while the instance is whole.
  const failure* cause() const {
    const entry* first = nullptr;
    for (auto& [where, e] : missing_)
      if (!first || e.since_ns < first->since_ns)
        first = &e;
    return first ? &first->why : nullptr;
  }

  size_t size() const { return missing_.size(); }
  bool empty() const { return missing_.empty(); }

 private:
  struct entry {
    failure why;
    int64_t since_ns = 0;
  };
  static std::pair<uint32_t, uint32_t> place(const rank_ref& r) { return {r.pp, r.tp}; }
  std::map<std::pair<uint32_t, uint32_t>, entry> missing_;
};

}  // namespace kvferry
