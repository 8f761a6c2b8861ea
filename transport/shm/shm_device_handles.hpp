// The shm receiver's device regions: for each, the handle peers map it with
// (device_copier::export_shared, CUDA IPC on a GPU), made once at registration
// and sent in a device_grant. Thread-safe.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "transport/region.hpp"

namespace kvferry::transport::shm {

class shm_device_handles {
 public:
  void add(region_id id, std::vector<std::byte> handle) {
    std::lock_guard guard{mu_};
    handles_[id] = std::move(handle);
  }

  void remove(region_id id) {
    std::lock_guard guard{mu_};
    handles_.erase(id);
  }

  std::optional<std::vector<std::byte>> find(region_id id) const {
    std::lock_guard guard{mu_};
    auto i = handles_.find(id);
    if (i == handles_.end())
      return std::nullopt;
    return i->second;
  }

 private:
  mutable std::mutex mu_;
  std::map<region_id, std::vector<std::byte>> handles_;
};

}  // namespace kvferry::transport::shm
