// The registered memory of one verbs transport: the bounds-checked region
// table, each region's memory registration (ibv_reg_mr, local and remote
// write, or memory-window binding instead of remote write), and pins. The NIC reads a sender's
// regions and writes a receiver's without any thread of ours running, so deregister() waits until
// no admitted batch (receiver) and no posted batch (sender) holds the region.
#pragma once

#include <infiniband/verbs.h>

#include <condition_variable>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "transport/base/region_table.hpp"
#include "transport/verbs/verbs_device.hpp"

namespace kvferry::transport::verbs {

/// A bounds-checked piece of a registered region.
struct mr_span {
  std::byte* addr = nullptr;
  uint32_t lkey = 0;
  uint32_t rkey = 0;     ///< the whole region's; no remote access with windows
  ibv_mr* mr = nullptr;  ///< what memory windows over it are bound to
};

class verbs_regions {
 public:
  /// `windows`: regions are written only through memory windows the receiver
  /// binds per batch (verbs_options::windows), so they are registered for
  /// binding and without remote write: their own rkeys grant nothing.
  verbs_regions(std::shared_ptr<device> dev, bool windows)
      : dev_(std::move(dev)), windows_(windows) {}
  verbs_regions(const verbs_regions&) = delete;
  verbs_regions& operator=(const verbs_regions&) = delete;
  ~verbs_regions();

  /// Registers [base, base + length). Any pointer the device's driver accepts:
  /// host memory, or GPU memory where a peer-memory client is loaded.
  result<region_id> add(void* base, uint64_t length, memory_kind kind = memory_kind::host);

  /// Waits until no batch pins `id`, then unregisters it.
  status remove(region_id id);

  /// [offset, offset + length) of region `id` or the error naming the values;
  /// `what` says whose region it is ("local", "receiver").
  result<mr_span> find(region_id id, uint64_t offset, uint64_t length, const char* what) const;

  /// Size of region `id`, 0 if unknown.
  uint64_t length_of(region_id id) const { return table_.length_of(id); }

  /// True when remote writes go through memory windows only.
  bool windows() const { return windows_; }

  /// Marks each of `ids` busy once more / ends one pin of each.
  void pin(const std::vector<region_id>& ids);
  void unpin(const std::vector<region_id>& ids);

 private:
  std::shared_ptr<device> dev_;
  const bool windows_;
  region_table table_;
  mutable std::mutex mu_;  // guards mrs_ and pins_
  std::condition_variable unpinned_;
  std::map<region_id, ibv_mr*> mrs_;
  std::map<region_id, uint32_t> pins_;
};

}  // namespace kvferry::transport::verbs
