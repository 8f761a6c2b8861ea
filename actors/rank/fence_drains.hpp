// The concluded rooms of a decode rank whose fence is not quiet yet: a write
// may still be landing in their pages, so the pages stay with the room until
// the transport says nothing of it can land any more. A writer that does not
// finish within a limit (frozen, partitioned half way through a batch) is cut
// off, so that its batch stops where it is. Plain logic: the actor asks the
// transport and releases the pages.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "messages/handles.hpp"
#include "messages/poll_snapshot.hpp"

namespace kvferry {

class fence_drains {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  /// A concluded room waiting for its fence to be quiet.
  struct drain {
    room_slot_ptr slot;
    std::vector<std::string> writers;  ///< endpoints of its writing sources
    time_point since;
    bool staged = false;  ///< its staging room closes with it
    room_key key;
    bool cut = false;  ///< the writers were disconnected
  };

  /// Waits for the fence of `token` (the room's generation) to be quiet.
  void add(uint64_t token, drain d) { draining_.insert_or_assign(token, std::move(d)); }

  bool contains(uint64_t token) const { return draining_.count(token) > 0; }
  bool empty() const { return draining_.empty(); }
  size_t size() const { return draining_.size(); }

  /// One look at every drain at `now`: `close(token)` is true once its fence
  /// is quiet; such drains leave and are returned (their pages may go back).
  /// Writers of a drain older than `limit` are cut off once, each by
  /// `cut(endpoint)`.
  template <class Close, class Cut>
  std::vector<drain> sweep(time_point now, std::chrono::nanoseconds limit, Close close, Cut cut) {
    std::vector<drain> quiet;
    for (auto i = draining_.begin(); i != draining_.end();) {
      auto& d = i->second;
      if (close(i->first)) {
        quiet.push_back(std::move(d));
        i = draining_.erase(i);
        continue;
      }
      if (!d.cut && now - d.since >= limit) {
        for (auto& w : d.writers)
          cut(w);
        d.cut = true;
      }
      ++i;
    }
    return quiet;
  }

 private:
  std::map<uint64_t, drain> draining_;  // by fence token
};

}  // namespace kvferry
