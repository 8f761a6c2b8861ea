// The staged jobs of a transfer actor that wait for their peer's ring, plain
// logic (no CAF): one queue per peer, in ask order. A staged job waits here
// from its ask until its bulk write goes out (or it fails); a job of a room
// keeps its place behind the room's earlier chunks to that peer, whose order
// matters to the room's last chunk. Which job may go is staged_pass's rule.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <utility>
#include <vector>

#include "messages/ids.hpp"

namespace kvferry {

class staged_queue {
 public:
  /// Job `id` of `room` waits for `peer`'s ring, behind the jobs queued before.
  void push(const rank_ref& peer, uint64_t id, const room_key& room);

  /// True while job `id` waits in `peer`'s queue.
  bool contains(const rank_ref& peer, uint64_t id) const;

  /// Takes job `id` out of `peer`'s queue; false if it was not there.
  bool remove(const rank_ref& peer, uint64_t id);

  /// Takes job `id` out of `peer`'s queue with every later job of its room
  /// waiting behind it (their writes would be wasted once it fails). Returns
  /// `id` first, then those, in queue order; just `id` if it was not queued.
  std::vector<uint64_t> cut(const rank_ref& peer, uint64_t id);

  /// The jobs waiting for `peer`'s ring, in queue order.
  std::vector<uint64_t> waiting(const rank_ref& peer) const;

  /// Forgets `peer`'s queue (the peer is gone or registered again).
  void forget(const rank_ref& peer) { queues_.erase(peer); }

  /// A waiting job and the peer whose ring it waits for.
  struct waiting_job {
    uint64_t job = 0;
    rank_ref peer;
    bool operator==(const waiting_job&) const = default;
  };

  /// Every waiting job with its peer, oldest (lowest id) first.
  std::vector<waiting_job> oldest_first() const;

  /// Jobs waiting, over every peer.
  size_t size() const;

 private:
  struct entry {
    uint64_t id = 0;
    room_key room;
  };
  std::map<rank_ref, std::deque<entry>> queues_;
};

}  // namespace kvferry
