// A rank's watch over the deciders of its live rooms, plain logic: when each
// was last heard from (a ping, a key, a verdict), and which has been silent
// longer than allowed. Each watched decider carries a label (who it is) that
// goes into the cause, so every rank that declares it lost says the same words.
#pragma once

#include <map>
#include <set>
#include <vector>

namespace kvferry {

template <class Key, class TimePoint, class Label>
class silence_watch {
 public:
  /// Starts watching `who` (labelled `label`), or restarts its grace period:
  /// a decider that pinged nobody while it had no live room is not silent.
  void watch(const Key& who, Label label, TimePoint now) {
    auto& e = watched_[who];
    e.label = std::move(label);
    if (e.last < now)
      e.last = now;
  }

  /// `who` was heard from at `now`; ignored unless watched.
  void heard(const Key& who, TimePoint now) {
    if (auto i = watched_.find(who); i != watched_.end() && i->second.last < now)
      i->second.last = now;
  }

  /// Restarts every grace period at `now`: the watcher itself was stalled
  /// (frozen, starved), so their silence says nothing about them.
  void refresh(TimePoint now) {
    for (auto& [who, e] : watched_)
      if (e.last < now)
        e.last = now;
  }

  /// Watched peers not heard from for longer than `limit` at `now`.
  template <class Duration>
  std::vector<Key> silent(TimePoint now, Duration limit) const {
    std::vector<Key> out;
    for (auto& [who, e] : watched_)
      if (now - e.last > limit)
        out.push_back(who);
    return out;
  }

  /// True when `who` is watched and was heard from within `limit` of `now`.
  template <class Duration>
  bool heard_within(const Key& who, TimePoint now, Duration limit) const {
    auto i = watched_.find(who);
    return i != watched_.end() && now - i->second.last <= limit;
  }

  /// The label `who` is watched under, or `fallback` when it is not watched.
  Label label_or(const Key& who, Label fallback) const {
    auto i = watched_.find(who);
    return i == watched_.end() ? fallback : i->second.label;
  }

  /// Stops watching every peer not in `keep`.
  void retain(const std::set<Key>& keep) {
    std::erase_if(watched_, [&](auto& kv) { return !keep.count(kv.first); });
  }

  size_t size() const { return watched_.size(); }

 private:
  struct entry {
    Label label;
    TimePoint last{};
  };
  std::map<Key, entry> watched_;
};

}  // namespace kvferry
