// Segment lists shaped like staging's traffic, for the segment copy tests:
// head slices of a KV pool (gather: strided pieces -> one contiguous slot;
// scatter: the reverse) and random lists with disjoint destinations.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "transport/segment_copy.hpp"

namespace kvferry::test {

using transport::copy_segment;

/// A pool of `layers` x 2 (K, V) x `tokens` rows of `row_bytes`; rank `rank`
/// of `ranks` owns the slice of `row_bytes / ranks` at `rank` times that in
/// every row. The gather copies the slice of every row, in order, into a
/// contiguous buffer of layers * 2 * tokens * slice bytes.
struct head_slices {
  uint64_t layers = 32, tokens = 64, row_bytes = 8192, ranks = 4, rank = 1;

  uint64_t slice() const { return row_bytes / ranks; }
  uint64_t rows() const { return layers * 2 * tokens; }
  uint64_t pool_bytes() const { return rows() * row_bytes; }
  uint64_t slot_bytes() const { return rows() * slice(); }

  /// pool -> slot
  std::vector<copy_segment> gather() const {
    std::vector<copy_segment> out;
    out.reserve(rows());
    for (uint64_t r = 0; r < rows(); ++r)
      out.push_back({r * row_bytes + rank * slice(), r * slice(), slice()});
    return out;
  }

  /// slot -> pool
  std::vector<copy_segment> scatter() const {
    auto out = gather();
    for (auto& s : out)
      std::swap(s.src_offset, s.dst_offset);
    return out;
  }
};

/// `count` segments of 0..max_len bytes at unaligned offsets: destinations
/// are disjoint pieces of `dst_size` (in shuffled order), sources anywhere in
/// `src_size` (they may overlap: reads only). Fewer segments when dst fills.
inline std::vector<copy_segment> random_segments(std::mt19937_64& rng, size_t count,
                                                 uint64_t max_len, uint64_t src_size,
                                                 uint64_t dst_size) {
  std::vector<copy_segment> out;
  uint64_t at = 0;
  for (size_t i = 0; i < count; ++i) {
    uint64_t gap = rng() % 40;
    uint64_t len = rng() % (max_len + 1);
    len = std::min(len, src_size);
    if (at + gap + len > dst_size)
      break;
    uint64_t src = src_size - len == 0 ? 0 : rng() % (src_size - len + 1);
    out.push_back({src, at + gap, len});
    at += gap + len;
  }
  std::shuffle(out.begin(), out.end(), rng);
  return out;
}

/// Bytes that differ from their neighbours and from any other buffer made
/// with another seed.
inline std::vector<std::byte> random_bytes(uint64_t n, uint64_t seed) {
  std::vector<std::byte> out(n);
  std::mt19937_64 rng{seed};
  for (uint64_t i = 0; i < n; i += 8) {
    uint64_t v = rng();
    for (uint64_t k = 0; k < 8 && i + k < n; ++k)
      out[i + k] = std::byte(v >> (8 * k));
  }
  return out;
}

}  // namespace kvferry::test
