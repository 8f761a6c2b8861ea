// What is left of rooms no longer on record: one value per room forgotten,
// the newest kept up to a bound, found by room id without a scan (a prefill
// rank's cleared rooms, a decider's decided rooms). Plain logic (no CAF).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kvferry {

template <class T>
class tombstones {
 public:
  explicit tombstones(size_t bound) : bound_(bound) {}

  /// Keeps `value` for room `room`; the oldest is forgotten beyond the bound.
  void bury(uint64_t room, T value) {
    if (bound_ == 0)
      return;
    by_room_[room].push_back(first_seq_ + list_.size());
    list_.push_back({room, std::move(value)});
    if (list_.size() > bound_)
      forget_oldest();
  }

  /// The newest value kept for room `room`, or nullptr.
  const T* newest(uint64_t room) const {
    auto i = by_room_.find(room);
    return i == by_room_.end() ? nullptr : &at(i->second.back());
  }

  /// The newest value kept for room `room` that `pred` accepts, or nullptr.
  template <class Pred>
  const T* find(uint64_t room, Pred pred) const {
    auto i = by_room_.find(room);
    if (i == by_room_.end())
      return nullptr;
    for (auto seq = i->second.rbegin(); seq != i->second.rend(); ++seq)
      if (pred(at(*seq)))
        return &at(*seq);
    return nullptr;
  }

  size_t size() const { return list_.size(); }
  size_t bound() const { return bound_; }

 private:
  struct entry {
    uint64_t room;
    T value;
  };

  const T& at(uint64_t seq) const { return list_[seq - first_seq_].value; }

  void forget_oldest() {
    auto i = by_room_.find(list_.front().room);
    i->second.erase(i->second.begin());  // its oldest is the list's oldest
    if (i->second.empty())
      by_room_.erase(i);
    list_.pop_front();
    ++first_seq_;
  }

  size_t bound_;
  std::deque<entry> list_;  // oldest first
  uint64_t first_seq_ = 0;  // the sequence number of list_.front()
  std::unordered_map<uint64_t, std::vector<uint64_t>> by_room_;  // ascending
};

}  // namespace kvferry
