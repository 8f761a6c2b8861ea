// Memory that another process on this host can map: anonymous memfd files
// mapped MAP_SHARED. The shm backend writes straight into a peer's regions, so
// regions it registers must come from here; the process-wide index answers
// "which file and offset back this address range" when a region is registered
// and when its file descriptor is handed to a peer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "transport/status.hpp"

namespace kvferry::transport {

/// One memfd-backed mapping, pre-faulted, owned: unmapped and its file closed on
/// destruction. Listed in the process-wide index while it lives.
class shared_memory {
 public:
  /// Creates a memfd of `bytes` (rounded up to the page size), maps it shared
  /// and touches every page (a first touch costs ~50x a copy on the VMs we run
  /// on). `name` shows in /proc/<pid>/maps ("memfd:<name>").
  static result<shared_memory> allocate(uint64_t bytes, const char* name = "kvferry");

  shared_memory() = default;
  shared_memory(shared_memory&& other) noexcept;
  shared_memory& operator=(shared_memory&& other) noexcept;
  shared_memory(const shared_memory&) = delete;
  shared_memory& operator=(const shared_memory&) = delete;
  ~shared_memory();

  std::byte* data() const { return data_; }
  /// The length asked for (the mapping may be up to a page longer).
  uint64_t size() const { return size_; }

 private:
  void release();

  std::byte* data_ = nullptr;
  uint64_t size_ = 0;
  uint64_t mapped_ = 0;
  int fd_ = -1;
};

/// Where an address range lives in shared memory: the memfd (owned by the
/// shared_memory object; dup it to keep it) and the range's offset in it.
struct shared_backing {
  int fd = -1;
  uint64_t offset = 0;
};

/// The backing of [base, base + length) when the whole range lies inside one
/// live shared_memory of this process; nullopt otherwise.
std::optional<shared_backing> find_shared_backing(const void* base, uint64_t length);

/// The system page size.
uint64_t page_size();

}  // namespace kvferry::transport
