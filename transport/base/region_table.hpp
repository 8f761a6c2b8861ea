// The registered memory of one transport and the bounds check every write
// passes; every backend keeps its regions in one.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <shared_mutex>

#include "transport/device_memory.hpp"
#include "transport/region.hpp"
#include "transport/status.hpp"

namespace kvferry::transport {

/// The regions of one transport. Thread-safe: writers of remote data hold a
/// read guard while they copy, so remove() returns only once no copy into the
/// region is running, and none starts after it.
class region_table {
 public:
  using read_guard = std::shared_lock<std::shared_mutex>;

  region_table() = default;
  region_table(const region_table&) = delete;
  region_table& operator=(const region_table&) = delete;

  /// Registers [base, base + length) of `kind` memory. The memory must stay
  /// valid until remove().
  result<region_id> add(void* base, uint64_t length, memory_kind kind = memory_kind::host);

  /// Unregisters `id`; waits for copies into it that are running.
  status remove(region_id id);

  /// Takes the guard under which resolve() may be called.
  read_guard guard() const { return read_guard{mu_}; }

  /// The address of [offset, offset + length) of region `id`, or the error that
  /// names the region, the offset, the length and the region's size. `what`
  /// says whose region it is in messages ("local", "remote").
  result<std::byte*> resolve(const read_guard& held, region_id id, uint64_t offset, uint64_t length,
                             const char* what) const;

  /// Size of region `id`, 0 if unknown.
  uint64_t length_of(region_id id) const;

  /// Size of region `id`, 0 if unknown, under a guard the caller holds.
  uint64_t length_of(const read_guard& held, region_id id) const;

  /// What memory region `id` is (host if unknown), under a guard the caller holds.
  memory_kind kind_of(const read_guard& held, region_id id) const;

  /// True once a device region was registered (and not necessarily removed).
  bool has_device_memory() const { return device_seen_; }

 private:
  struct entry {
    std::byte* base;
    uint64_t length;
    memory_kind kind;
  };

  mutable std::shared_mutex mu_;
  std::map<region_id, entry> regions_;
  region_id next_ = 1;
  std::atomic<bool> device_seen_ = false;
};

}  // namespace kvferry::transport
