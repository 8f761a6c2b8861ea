// The gather and scatter of staging on the GPU: one kernel launch copies a
// whole list of segments (transport/segment_copy.hpp's copy_segment) between
// two device buffers. Each warp copies one tile (4 KiB) of one segment at a
// time, with 16-byte loads and stores where source and destination share their
// alignment (8, 4 or 1 bytes otherwise), so thousands of 256 B head slices and
// a few MiB-sized pages go through the same launch. copy_segments_cpu is the
// reference it is tested against (tests/cuda/cuda_test.cpp).
#pragma once

#include <cstdint>
#include <span>

#include "transport/cuda/cuda_memory.hpp"
#include "transport/segment_copy.hpp"
#include "transport/status.hpp"

namespace kvferry::transport::cuda {

/// A segment list in device memory, checked against the buffer sizes it was
/// uploaded for. Upload it once for a shape that repeats (the gather of every
/// chunk of a room) and launch it many times. Move-only.
class segment_list {
 public:
  segment_list() = default;

  /// Checks `segments` (check_segments against `src_size` and `dst_size`:
  /// out_of_bounds names the first bad segment) and copies them, with the
  /// index the kernel searches, into device memory. Synchronous: `segments`
  /// may be released on return.
  static result<segment_list> upload(std::span<const copy_segment> segments, uint64_t src_size,
                                     uint64_t dst_size);

  size_t count() const { return count_; }
  uint64_t bytes() const { return bytes_; }        ///< sum of the lengths
  uint64_t src_size() const { return src_size_; }  ///< the sizes it was checked against
  uint64_t dst_size() const { return dst_size_; }

 private:
  friend status copy_segments(std::span<std::byte>, std::span<const std::byte>, const segment_list&,
                              stream_handle);

  device_buffer mem_;  ///< count_ segments, then count_ + 1 first-tile indices
  size_t count_ = 0;
  uint64_t tiles_ = 0;
  uint64_t bytes_ = 0;
  uint64_t src_size_ = 0;
  uint64_t dst_size_ = 0;
};

/// Queues the copy of every segment of `list` from `src` to `dst` (device
/// addresses, or mapped pinned memory) on `stream` and returns: the copy is
/// done when the stream has passed it. `dst` and `src` must be at least the
/// sizes `list` was checked against (invalid_argument otherwise); `list` must
/// stay alive until the stream has passed the copy. Destinations of distinct
/// segments must not overlap (they are copied concurrently).
status copy_segments(std::span<std::byte> dst, std::span<const std::byte> src,
                     const segment_list& list, stream_handle stream);

/// The one-shot form: checks `segments` against `dst` and `src`, copies the
/// list to device memory allocated in stream order, launches, and frees it in
/// stream order. `segments` may be released on return.
status copy_segments(std::span<std::byte> dst, std::span<const std::byte> src,
                     std::span<const copy_segment> segments, stream_handle stream);

}  // namespace kvferry::transport::cuda
