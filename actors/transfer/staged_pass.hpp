// One pass of a transfer actor over its staged queue, plain logic (no CAF):
// the rule for which waiting job may go now. The actor asks decide() for each
// job, oldest first over every peer, and does what it says.
//
// A job goes once it is granted, its slot was consumed by the ring's
// watermark and gather space is free. A job that must wait holds back only
// the later chunks of its own room to that peer (their order matters to the
// room's last chunk); other rooms go past it. Once the oldest writable job
// finds no gather space, no later job of the pass takes any, so a large chunk
// is not starved by smaller ones. This cannot deadlock: the oldest space held
// in a ring is always writable, and gather space comes back as writes
// complete.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <utility>

#include "actors/transfer/gather_space.hpp"
#include "actors/transfer/job_book.hpp"
#include "messages/ids.hpp"

namespace kvferry {

class staged_pass {
 public:
  /// What to do with a waiting job.
  enum class step {
    skip,       ///< an earlier chunk of its room waits: leave it queued
    tail_only,  ///< a last chunk without pages: it goes now, with no ring write
    wait,       ///< not granted, its slot not consumed, or no gather space: it stays
    bad_grant,  ///< its grant lies outside the ring (bad_grant_cause): it fails
    go,         ///< its bulk write goes now, gathered at `gather_at`
  };

  struct decision {
    step what = step::skip;
    uint64_t gather_at = 0;  ///< the gather space taken, for step::go
  };

  /// The step for job `j`, waiting for `peer`'s ring of `ring_size` bytes
  /// consumed up to `consumed`. On step::go the job's gather space is taken
  /// from `space`.
  decision decide(const rank_ref& peer, const transfer_job& j, uint64_t ring_size,
                  uint64_t consumed, gather_space& space);

  /// The cause of a step::bad_grant.
  static std::string bad_grant_cause(const transfer_job& j, uint64_t ring_size,
                                     const rank_ref& peer);

 private:
  std::set<std::pair<rank_ref, room_key>> held_back_;  // rooms with a job that waits
  bool space_reserved_ = false;  // the oldest writable job found no gather space
};

}  // namespace kvferry
