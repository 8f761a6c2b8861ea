// Heartbeat bookkeeping, plain logic: which peers a watcher may ping now, how
// many rounds in a row passed without an answer, and when that makes a peer
// lost. One ping is out at a time; a round that finds it still out is a miss,
// and an answer, however late, starts the count over. A lost peer that
// answers again is alive again.
#pragma once

#include <cstdint>
#include <map>
#include <set>

namespace kvferry {

template <class Key>
class liveness {
 public:
  enum class standing { alive, newly_lost, still_lost };

  explicit liveness(uint32_t misses) : misses_(misses == 0 ? 1 : misses) {}

  /// True if `who` may be pinged now (no ping to it is out); marks one out.
  bool ping(const Key& who) {
    auto& w = watch_[who];
    if (w.waiting)
      return false;
    w.waiting = true;
    return true;
  }

  /// `who` answered: it is alive (again).
  void answered(const Key& who) {
    if (auto i = watch_.find(who); i != watch_.end())
      i->second = {};
  }

  /// A round found the ping to `who` still out: one more miss, and the ping
  /// stays out (an answer that comes late still counts as life). Alive
  /// (misses to spare), newly lost (this miss was the last one allowed), or
  /// lost already. `silent_long`: the watcher's clock says `who` has been
  /// silent for the whole silence already (interval x misses since the last
  /// ping it answered was sent, the watcher keeping time all along): then
  /// the rounds are not counted - they are an interval apart and begin only
  /// once a room names the peer, so counting alone lets up to one more
  /// interval pass.
  standing late(const Key& who, bool silent_long = false) { return miss(who, false, silent_long); }

  /// The ping to `who` failed or its answer never came: one more miss, and
  /// `who` may be pinged again.
  standing missed(const Key& who, bool silent_long = false) { return miss(who, true, silent_long); }

  bool watching(const Key& who) const { return watch_.count(who) > 0; }

  bool lost(const Key& who) const {
    auto i = watch_.find(who);
    return i != watch_.end() && i->second.lost;
  }

  /// Forgets every peer not in `keep` (no longer watched).
  void retain(const std::set<Key>& keep) {
    std::erase_if(watch_, [&](auto& kv) { return !keep.count(kv.first); });
  }

  size_t size() const { return watch_.size(); }
  uint32_t misses() const { return misses_; }

 private:
  standing miss(const Key& who, bool over, bool silent_long) {
    auto i = watch_.find(who);
    if (i == watch_.end())
      return standing::alive;  // no longer watched
    auto& w = i->second;
    if (over)
      w.waiting = false;
    if (w.lost)
      return standing::still_lost;
    if (++w.misses < misses_ && !silent_long)
      return standing::alive;
    w.lost = true;
    return standing::newly_lost;
  }

  struct watch {
    uint32_t misses = 0;
    bool waiting = false;
    bool lost = false;
  };
  uint32_t misses_;
  std::map<Key, watch> watch_;
};

}  // namespace kvferry
