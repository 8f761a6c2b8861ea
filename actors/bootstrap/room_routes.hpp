// DP attention without follow_bootstrap_room: which prefill DP group serves
// each room, as the group's prefill ranks registered it at their instance's
// bootstrap, for the decode ranks that ask. Plain logic behind the bootstrap
// actor: bounded in entries and in age, and a room keeps the group it was
// first registered with.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kvferry {

class room_routes {
 public:
  /// At most `capacity` rooms (the oldest go first when it is full), each
  /// kept `ttl` after its registration.
  room_routes(size_t capacity, std::chrono::nanoseconds ttl) : capacity_(capacity), ttl_(ttl) {}

  /// How the instance's rooms find their group: by bootstrap_room % dp_size
  /// (true, until a rank says otherwise) or by registration (false). The
  /// first word holds; a rank that contradicts it gets the problem back.
  std::optional<std::string> set_follows_room(bool follows, const std::string& instance);
  bool follows_room() const { return follows_room_.value_or(true); }

  /// Room `room` is served by group `group` of an instance of `dp_size`
  /// groups (0: not known yet), registered at `now_ns`. The same group again
  /// is no change. Returns the problem, naming the values: a group out of
  /// range, or a room another group holds (two requests with one room).
  std::optional<std::string> add(uint64_t room, uint32_t group, uint32_t dp_size,
                                 const std::string& instance, int64_t now_ns);

  /// The group of each of `rooms` that is registered and not expired at
  /// `now_ns`, as (room, group) pairs in the order asked.
  std::vector<std::pair<uint64_t, uint32_t>> find(const std::vector<uint64_t>& rooms,
                                                  int64_t now_ns);

  size_t size() const { return groups_.size(); }
  /// Rooms dropped to keep within the capacity (not by age) since the start.
  uint64_t evicted() const { return evicted_; }

 private:
  void expire(int64_t now_ns);

  size_t capacity_;
  std::chrono::nanoseconds ttl_;
  std::optional<bool> follows_room_;
  struct entry {
    uint32_t group;
    int64_t at;
  };
  std::unordered_map<uint64_t, entry> groups_;
  std::deque<std::pair<int64_t, uint64_t>> order_;  // (registered at, room), oldest first
  uint64_t evicted_ = 0;
};

}  // namespace kvferry
