// Segment copies: the gather and scatter of staging as one list of
// (src_offset, dst_offset, length) between two buffers. This file is the CPU
// implementation and the reference the CUDA kernel (transport/cuda/
// cuda_segment_copy.hpp) is tested against; it knows neither CAF nor CUDA and
// is always built.
//
//   gather:  many strided pieces of a KV pool  -> one contiguous staging slot
//   scatter: one contiguous staging slot       -> many pieces of KV pages
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "transport/status.hpp"

namespace kvferry::transport {

/// One piece to copy: `length` bytes from `src + src_offset` to `dst + dst_offset`.
/// A zero length is allowed and copies nothing.
struct copy_segment {
  uint64_t src_offset = 0;
  uint64_t dst_offset = 0;
  uint64_t length = 0;

  friend bool operator==(const copy_segment&, const copy_segment&) = default;
};

/// Checks every segment against both buffer sizes. The first segment that
/// reaches past either buffer (or whose offset + length overflows) gives
/// out_of_bounds, naming its index, offset, length and the buffer's size:
/// "copy segment 3: dst_offset 8192 + length 512 past the destination (8448 B)".
status check_segments(std::span<const copy_segment> segments, uint64_t src_size, uint64_t dst_size);

/// The sum of all segment lengths (no overflow check: check_segments first).
uint64_t total_bytes(std::span<const copy_segment> segments);

/// Copies every segment from `src` into `dst`, in list order, with memcpy.
/// All segments are checked first (check_segments); when one is out of bounds
/// nothing is copied. `src` and `dst` must not overlap, and destinations of
/// different segments should not overlap either: the CUDA kernel copies
/// segments concurrently, so only disjoint destinations give the same bytes on
/// both. Thread-safe for distinct `dst`.
status copy_segments_cpu(std::span<std::byte> dst, std::span<const std::byte> src,
                         std::span<const copy_segment> segments);

}  // namespace kvferry::transport
