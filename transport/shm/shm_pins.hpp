// Regions the shm receiver has let a peer write into and whose copies may
// still be running in the peer's process. deregister_region() waits here until
// no admitted batch holds the region, since it cannot see the peer's memcpy.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <vector>

#include "transport/region.hpp"

namespace kvferry::transport::shm {

class shm_pins {
 public:
  /// Marks each of `ids` busy once more.
  void pin(const std::vector<region_id>& ids) {
    std::lock_guard guard{mu_};
    for (auto id : ids)
      ++count_[id];
  }

  /// Ends one pin of each of `ids`.
  void unpin(const std::vector<region_id>& ids) {
    {
      std::lock_guard guard{mu_};
      for (auto id : ids) {
        auto i = count_.find(id);
        if (i != count_.end() && --i->second == 0)
          count_.erase(i);
      }
    }
    cv_.notify_all();
  }

  /// Blocks until region `id` has no pin.
  void wait_unpinned(region_id id) {
    std::unique_lock guard{mu_};
    cv_.wait(guard, [&] { return count_.count(id) == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<region_id, uint32_t> count_;
};

}  // namespace kvferry::transport::shm
