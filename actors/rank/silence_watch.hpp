// A rank's watch over the deciders of its live rooms, plain logic: when each
// was last heard from (a ping, a key, a verdict), and which has been silent
// longer than allowed. Each watched decider carries the name that goes into
// the cause, so every rank that declares it lost says the same words.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

namespace kvferry {

template <class Key, class TimePoint>
class silence_watch {
 public:
  /// Starts watching `who` (named `name`), or restarts its grace period: a
  /// decider that pinged nobody while it had no live room is not silent.
  void watch(const Key& who, std::string name, TimePoint now) {
    auto& e = watched_[who];
    e.name = std::move(name);
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

  const std::string& name(const Key& who) const { return watched_.at(who).name; }

  /// Stops watching every peer not in `keep`.
  void retain(const std::set<Key>& keep) {
    std::erase_if(watched_, [&](auto& kv) { return !keep.count(kv.first); });
  }

  size_t size() const { return watched_.size(); }

 private:
  struct entry {
    std::string name;
    TimePoint last{};
  };
  std::map<Key, entry> watched_;
};

}  // namespace kvferry
