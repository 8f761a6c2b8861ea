// Device (GPU) memory in the data plane. A region is registered as host or
// device memory. verbs can hand device memory to the NIC itself (GPUDirect
// RDMA); the host backends (tcp, shm, inproc) reach it through a
// device_copier, which moves it in pieces through pinned host buffers, copies
// between any two addresses, runs the gather and scatter of staging, and
// shares a device region with another process of the host (CUDA IPC).
//
// The CUDA data plane implements it (transport/cuda/cuda_device_copier.hpp).
// host_device_copier.hpp implements it over ordinary memory, so that the
// backends' device paths are exercised on machines without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "transport/segment_copy.hpp"
#include "transport/status.hpp"

namespace kvferry::transport {

enum class memory_kind : uint8_t {
  host,    ///< ordinary (or pinned, or shared) host memory
  device,  ///< GPU memory: never dereferenced by the host
};

std::string_view to_string(memory_kind k);

/// How the host backends reach device memory. Thread-safe: several threads of
/// a transport use one copier at once.
class device_copier {
 public:
  /// A piece of device memory in host memory, handed over in order; valid only
  /// during the call. A status that is not ok stops the read.
  using read_piece = std::function<status(uint64_t offset, std::span<const std::byte> piece)>;
  /// Fills a piece of host memory with the bytes of [offset, offset + size)
  /// of what is being written; a status that is not ok stops the write.
  using fill_piece = std::function<status(uint64_t offset, std::span<std::byte> piece)>;

  virtual ~device_copier() = default;

  /// For logs and errors: "cuda", "host".
  virtual std::string_view name() const = 0;

  /// Reads `bytes` of device memory at `src` piece by piece; the next pieces
  /// are copied while `on_piece` runs. Returns the first error (a copy's, or
  /// on_piece's own) once nothing is in flight.
  virtual status read(const std::byte* src, uint64_t bytes, const read_piece& on_piece) = 0;

  /// Writes `bytes` of device memory at `dst` from pieces that `fill` writes;
  /// piece i is filled while piece i - 1 travels to the device. Returns once
  /// every byte is in device memory, or with the first error.
  virtual status write(std::byte* dst, uint64_t bytes, const fill_piece& fill) = 0;

  /// Copies `bytes` between any two addresses, device or host; returns once
  /// the bytes are in place.
  virtual status copy(void* dst, const void* src, uint64_t bytes) = 0;

  /// Copies every segment from `src` to `dst` (staging's gather and scatter),
  /// either of which may be device memory or host memory given to pin_host().
  /// Checks every segment first (check_segments); returns once done.
  virtual status copy_segments(std::span<std::byte> dst, std::span<const std::byte> src,
                               std::span<const copy_segment> segments) = 0;

  /// Makes host memory reachable by copy_segments (page-locks and maps it);
  /// undone by unpin_host. For the staging ring and gather buffer.
  virtual status pin_host(void* base, uint64_t bytes) = 0;
  virtual void unpin_host(void* base) = 0;

  /// A handle for another process of this host to map device memory
  /// [base, base + bytes) with open_shared(); the memory must stay allocated
  /// while a peer has it mapped.
  virtual result<std::vector<std::byte>> export_shared(void* base, uint64_t bytes) = 0;

  /// Maps a peer's exported device memory; the mapping lasts as long as the
  /// returned pointer (its deleter unmaps). invalid_argument for a handle this
  /// copier cannot read; a handle from this same process may be refused.
  virtual result<std::shared_ptr<std::byte>> open_shared(std::span<const std::byte> handle,
                                                         uint64_t bytes) = 0;
};

}  // namespace kvferry::transport
