// Internal to the segment-copy kernel: what one lane of a warp does for one
// tile, written once for the device (cuda_segment_copy.cu) and the host, so
// tests/cuda/cuda_test.cpp can run every lane of every tile on the CPU and
// check the kernel's index arithmetic against copy_segments_cpu where no GPU
// is. Lanes of a warp share nothing and write disjoint bytes, so running them
// one after another gives what the warp gives.
#pragma once

#include <vector_types.h>  // uint2, uint4 (host compilers included)

#include <cstdint>
#include <span>
#include <vector>

#include "transport/segment_copy.hpp"

#if defined(__CUDACC__)
#define KVFERRY_HOST_DEVICE __host__ __device__
#else
#define KVFERRY_HOST_DEVICE
#endif

namespace kvferry::transport::cuda::lanes {

/// A warp copies one tile of one segment at a time: big enough that a large
/// segment is a few long runs of 16-byte accesses, small enough that a list of
/// a few large segments still spreads over every multiprocessor.
constexpr uint64_t tile_bytes = 4096;
constexpr int warp_size = 32;

/// Lane `lane`'s share of copying n bytes, W bytes per access. `d` and `s`
/// have the same address modulo W: the head up to the first W-aligned byte
/// and the tail go byte by byte.
template <class W>
KVFERRY_HOST_DEVICE void copy_run(unsigned char* d, const unsigned char* s, uint64_t n, int lane) {
  constexpr uint64_t w = sizeof(W);
  uint64_t head = (w - (reinterpret_cast<uintptr_t>(s) & (w - 1))) & (w - 1);
  if (head > n)
    head = n;
  if (static_cast<uint64_t>(lane) < head)
    d[lane] = s[lane];
  uint64_t words = (n - head) / w;
  auto* vd = reinterpret_cast<W*>(d + head);
  auto* vs = reinterpret_cast<const W*>(s + head);
  // Four loads in flight per lane before the stores: the stores may alias
  // the loads as far as the compiler knows, so it would not batch them.
  uint64_t i = lane;
  for (; i + 3 * warp_size < words; i += 4 * warp_size) {
    W a = vs[i], b = vs[i + warp_size], c = vs[i + 2 * warp_size], e = vs[i + 3 * warp_size];
    vd[i] = a;
    vd[i + warp_size] = b;
    vd[i + 2 * warp_size] = c;
    vd[i + 3 * warp_size] = e;
  }
  for (; i < words; i += warp_size)
    vd[i] = vs[i];
  for (uint64_t k = head + words * w + lane; k < n; k += warp_size)
    d[k] = s[k];
}

/// The widest access that source and destination agree on.
KVFERRY_HOST_DEVICE inline void copy_tile(unsigned char* d, const unsigned char* s, uint64_t n,
                                          int lane) {
  auto mis = reinterpret_cast<uintptr_t>(d) ^ reinterpret_cast<uintptr_t>(s);
  if ((mis & 15) == 0)
    copy_run<uint4>(d, s, n, lane);
  else if ((mis & 7) == 0)
    copy_run<uint2>(d, s, n, lane);
  else if ((mis & 3) == 0)
    copy_run<unsigned>(d, s, n, lane);
  else
    copy_run<unsigned char>(d, s, n, lane);
}

/// Lane `lane`'s share of tile `t` of a list. first_tile[i] is segment i's
/// first tile, first_tile[count] the number of tiles; t < that number.
KVFERRY_HOST_DEVICE inline void copy_list_tile(unsigned char* dst, const unsigned char* src,
                                               const copy_segment* segments,
                                               const uint64_t* first_tile, uint64_t count,
                                               uint64_t t, int lane) {
  // The last segment whose first tile is <= t: empty segments share their
  // first tile with the next one, so the search lands on the one that has t.
  uint64_t lo = 0, hi = count;
  while (hi - lo > 1) {
    uint64_t mid = lo + (hi - lo) / 2;
    if (first_tile[mid] <= t)
      lo = mid;
    else
      hi = mid;
  }
  copy_segment seg = segments[lo];
  uint64_t off = (t - first_tile[lo]) * tile_bytes;
  uint64_t n = seg.length - off < tile_bytes ? seg.length - off : tile_bytes;
  copy_tile(dst + seg.dst_offset + off, src + seg.src_offset + off, n, lane);
}

/// first_tile for a list (count + 1 entries; the last is the number of tiles).
inline std::vector<uint64_t> first_tiles(std::span<const copy_segment> segments) {
  std::vector<uint64_t> out;
  out.reserve(segments.size() + 1);
  uint64_t tile = 0;
  for (auto& s : segments) {
    out.push_back(tile);
    tile += (s.length + tile_bytes - 1) / tile_bytes;
  }
  out.push_back(tile);
  return out;
}

}  // namespace kvferry::transport::cuda::lanes
