// Deadlines kept per room behind one timer, plain logic (no CAF). Each room
// has at most one deadline (the one armed last replaces it), tagged with what
// it was armed for (a room_fsm epoch, a room generation); a room that
// concludes or is forgotten takes its deadline with it. Its owner keeps one
// timer set for the earliest deadline (actors/common/deadline_timer.hpp), so
// that nothing it armed outlives its room: no timer per room left queued in
// CAF's clock until it fires stale. Used for a rank's room deadlines, a
// prefill rank's early arrivals and a decider's decided rooms.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

namespace kvferry {

template <class TimePoint>
class deadline_book {
 public:
  /// A deadline that came due: room id and the tag it was armed with.
  struct due {
    uint64_t room = 0;
    uint64_t tag = 0;
    bool operator==(const due&) const = default;
  };

  /// What the timer brought: the deadlines due, earliest first, and when the
  /// timer must be set again (if the next deadline has none set for it).
  struct fired {
    std::vector<due> due_now;
    std::optional<TimePoint> set_timer;
  };

  /// Room `room`'s deadline is `at` (tagged `tag`), replacing the one it
  /// had. Returns `at` when the timer must be set for it: no timer is set, or
  /// the one set goes off later.
  std::optional<TimePoint> arm(uint64_t room, uint64_t tag, TimePoint at) {
    disarm(room);
    by_room_.emplace(room, entry{at, tag});
    by_time_.emplace(at, room);
    if (timer_ && *timer_ <= at)
      return std::nullopt;
    timer_ = at;
    return at;
  }

  /// Room `room` has no deadline any more (it concluded, left, was forgotten).
  void disarm(uint64_t room) {
    auto i = by_room_.find(room);
    if (i == by_room_.end())
      return;
    by_time_.erase({i->second.at, room});
    by_room_.erase(i);
  }

  /// A timer went off at `now`: the deadlines due leave the book. A timer
  /// set for a deadline that was replaced since brings nothing.
  fired fire(TimePoint now) {
    fired out;
    if (timer_ && *timer_ <= now)
      timer_.reset();
    while (!by_time_.empty() && by_time_.begin()->first <= now) {
      auto room = by_time_.begin()->second;
      out.due_now.push_back({room, by_room_.at(room).tag});
      by_room_.erase(room);
      by_time_.erase(by_time_.begin());
    }
    if (!by_time_.empty() && (!timer_ || by_time_.begin()->first < *timer_)) {
      timer_ = by_time_.begin()->first;
      out.set_timer = timer_;
    }
    return out;
  }

  /// Rooms with a deadline.
  size_t size() const { return by_room_.size(); }

  /// The deadline of `room`, if it has one.
  std::optional<TimePoint> of(uint64_t room) const {
    auto i = by_room_.find(room);
    if (i == by_room_.end())
      return std::nullopt;
    return i->second.at;
  }

 private:
  struct entry {
    TimePoint at;
    uint64_t tag = 0;
  };
  std::map<uint64_t, entry> by_room_;
  std::set<std::pair<TimePoint, uint64_t>> by_time_;
  std::optional<TimePoint> timer_;  // the earliest time a timer is set for
};

}  // namespace kvferry
