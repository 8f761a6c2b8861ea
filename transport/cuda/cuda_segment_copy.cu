#include "transport/cuda/cuda_segment_copy.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "transport/cuda/cuda_check.hpp"
#include "transport/cuda/cuda_segment_copy_lanes.cuh"

namespace kvferry::transport::cuda {

namespace {

using lanes::tile_bytes;
using lanes::warp_size;
constexpr int threads_per_block = 256;

/// first_tile[i] is the index of segment i's first tile; first_tile[count] is
/// the number of tiles. Every warp takes tiles t, t + warps, ...
__global__ void copy_segments_kernel(unsigned char* dst, const unsigned char* src,
                                     const copy_segment* segments, const uint64_t* first_tile,
                                     uint64_t count, uint64_t tiles) {
  uint64_t thread = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  uint64_t warp = thread / warp_size;
  uint64_t warps = uint64_t(gridDim.x) * blockDim.x / warp_size;
  int lane = threadIdx.x % warp_size;
  for (uint64_t t = warp; t < tiles; t += warps)
    lanes::copy_list_tile(dst, src, segments, first_tile, count, t, lane);
}

/// The bytes uploaded for a list: the segments, then count + 1 first tiles.
struct packed_list {
  std::vector<std::byte> bytes;
  uint64_t tiles = 0;
};

packed_list pack(std::span<const copy_segment> segments) {
  packed_list p;
  auto n = segments.size();
  auto first = lanes::first_tiles(segments);
  p.bytes.resize(n * sizeof(copy_segment) + first.size() * sizeof(uint64_t));
  if (n > 0)
    std::memcpy(p.bytes.data(), segments.data(), n * sizeof(copy_segment));
  std::memcpy(p.bytes.data() + n * sizeof(copy_segment), first.data(),
              first.size() * sizeof(uint64_t));
  p.tiles = first.back();
  return p;
}

/// Launches the kernel over a packed list at `mem` on `stream`.
status launch(std::byte* dst, const std::byte* src, const std::byte* mem, size_t count,
              uint64_t tiles, cudaStream_t stream) {
  if (tiles == 0)
    return {};
  int device = 0;
  int sms = 0;
  KVFERRY_CUDA_TRY("cudaGetDevice", cudaGetDevice(&device));
  KVFERRY_CUDA_TRY("cudaDeviceGetAttribute(cudaDevAttrMultiProcessorCount)",
                   cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  // Enough blocks to fill every multiprocessor a few times over, no more
  // than there are tiles for; the grid-stride loop does the rest.
  constexpr uint64_t warps_per_block = threads_per_block / warp_size;
  uint64_t wanted = (tiles + warps_per_block - 1) / warps_per_block;
  auto blocks = static_cast<unsigned>(std::min<uint64_t>(wanted, uint64_t(std::max(sms, 1)) * 8));
  auto* segs = reinterpret_cast<const copy_segment*>(mem);
  auto* first = reinterpret_cast<const uint64_t*>(mem + count * sizeof(copy_segment));
  copy_segments_kernel<<<blocks, threads_per_block, 0, stream>>>(
      reinterpret_cast<unsigned char*>(dst), reinterpret_cast<const unsigned char*>(src), segs,
      first, count, tiles);
  KVFERRY_CUDA_TRY("copy_segments_kernel<<<" + std::to_string(blocks) + ", " +
                       std::to_string(threads_per_block) + ">>> over " + std::to_string(count) +
                       " segments",
                   cudaGetLastError());
  return {};
}

}  // namespace

status check_kernel_image() {
  cudaFuncAttributes attr{};
  KVFERRY_CUDA_TRY("cudaFuncGetAttributes(copy_segments_kernel)",
                   cudaFuncGetAttributes(&attr, copy_segments_kernel));
  return {};
}

result<segment_list> segment_list::upload(std::span<const copy_segment> segments, uint64_t src_size,
                                          uint64_t dst_size) {
  if (auto st = check_segments(segments, src_size, dst_size); !st.ok())
    return st;
  auto packed = pack(segments);
  auto mem = device_buffer::allocate(packed.bytes.size());
  if (!mem.ok())
    return mem.error();
  if (auto st = copy_bytes(mem->data(), packed.bytes.data(), packed.bytes.size()); !st.ok())
    return st;
  segment_list list;
  list.mem_ = std::move(mem).value();
  list.count_ = segments.size();
  list.tiles_ = packed.tiles;
  list.bytes_ = total_bytes(segments);
  list.src_size_ = src_size;
  list.dst_size_ = dst_size;
  return result<segment_list>{std::move(list)};
}

status copy_segments(std::span<std::byte> dst, std::span<const std::byte> src,
                     const segment_list& list, stream_handle stream) {
  if (dst.size() < list.dst_size_ || src.size() < list.src_size_)
    return status::invalid_argument(
        "copy_segments: buffers of " + std::to_string(src.size()) + " B (source) and " +
        std::to_string(dst.size()) + " B (destination) for a segment list checked against " +
        std::to_string(list.src_size_) + " B and " + std::to_string(list.dst_size_) + " B");
  return launch(dst.data(), src.data(), list.mem_.data(), list.count_, list.tiles_, stream);
}

status copy_segments(std::span<std::byte> dst, std::span<const std::byte> src,
                     std::span<const copy_segment> segments, stream_handle stream) {
  if (auto st = check_segments(segments, src.size(), dst.size()); !st.ok())
    return st;
  auto packed = pack(segments);
  if (packed.tiles == 0)
    return {};
  void* mem = nullptr;
  auto n = packed.bytes.size();
  KVFERRY_CUDA_TRY("cudaMallocAsync(" + std::to_string(n) + " B)",
                   cudaMallocAsync(&mem, n, stream));
  // From pageable memory the copy returns once CUDA has staged the bytes, so
  // `packed` may go out of scope right after.
  auto st = [&]() -> status {
    KVFERRY_CUDA_TRY("cudaMemcpyAsync(segment list, " + std::to_string(n) + " B)",
                     cudaMemcpyAsync(mem, packed.bytes.data(), n, cudaMemcpyHostToDevice, stream));
    return launch(dst.data(), src.data(), static_cast<const std::byte*>(mem), segments.size(),
                  packed.tiles, stream);
  }();
  auto freed = cudaFreeAsync(mem, stream);
  if (!st.ok())
    return st;
  KVFERRY_CUDA_TRY("cudaFreeAsync", freed);
  return {};
}

}  // namespace kvferry::transport::cuda
