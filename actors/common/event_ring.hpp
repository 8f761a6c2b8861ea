// A rank's recent room events, kept for `kvferry-ctl trace`: a ring of at
// most `capacity` events over all its rooms (the oldest go first), so what a
// rank keeps is bounded whatever its rate. Plain logic: the rank actor adds
// to it on its own thread and reads it when asked.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "messages/room_trace.hpp"

namespace kvferry {

class event_ring {
 public:
  /// Room events a rank keeps: at about 8 a room, its last ~500 rooms
  /// (under half a MiB).
  static constexpr size_t default_capacity = 4096;

  explicit event_ring(size_t capacity = default_capacity) : capacity_(capacity ? capacity : 1) {}

  /// Records `what` (and `cause`) of room `room`#`generation`, now.
  void add(uint64_t room, uint64_t generation, std::string what, std::string cause = {}) {
    room_event e{room,
                 generation,
                 std::chrono::duration_cast<std::chrono::nanoseconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count(),
                 std::chrono::duration_cast<std::chrono::nanoseconds>(
                     std::chrono::steady_clock::now().time_since_epoch())
                     .count(),
                 {},
                 std::move(what),
                 std::move(cause)};
    if (ring_.size() < capacity_) {
      ring_.push_back(std::move(e));
    } else {
      ring_[next_] = std::move(e);
      next_ = (next_ + 1) % capacity_;
    }
  }

  /// The events of room `room` on `rank`, oldest first.
  room_trace of_room(uint64_t room, const std::string& rank) const {
    room_trace out{rank, {}};
    for (size_t k = 0; k < ring_.size(); ++k) {
      auto& e = ring_[(next_ + k) % ring_.size()];
      if (e.room == room) {
        out.events.push_back(e);
        out.events.back().rank = rank;
      }
    }
    return out;
  }

  size_t size() const { return ring_.size(); }

 private:
  size_t capacity_;
  std::vector<room_event> ring_;
  size_t next_ = 0;  // the oldest, once full
};

}  // namespace kvferry
