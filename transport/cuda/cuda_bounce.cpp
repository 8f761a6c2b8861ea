#include "transport/cuda/cuda_bounce.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "transport/cuda/cuda_check.hpp"
#include "transport/cuda/cuda_memory.hpp"

namespace kvferry::transport::cuda {

struct bounce_pipeline::state {
  options opt;
  std::vector<pinned_buffer> pinned;
  std::vector<cudaEvent_t> done;  ///< done[b]: the last copy through pinned[b] finished
  cuda::stream copies;

  ~state() {
    for (auto e : done)
      cudaEventDestroy(e);
  }

  /// Waits for what is queued, keeping the first error `first` if there is one.
  status settle(status first) {
    auto synced = copies.synchronize();
    return first.ok() ? synced : first;
  }
};

bounce_pipeline::bounce_pipeline(std::unique_ptr<state> s) : s_(std::move(s)) {}
bounce_pipeline::bounce_pipeline(bounce_pipeline&&) noexcept = default;
bounce_pipeline& bounce_pipeline::operator=(bounce_pipeline&&) noexcept = default;
bounce_pipeline::~bounce_pipeline() = default;

size_t bounce_pipeline::piece_bytes() const {
  return s_->opt.piece_bytes;
}
size_t bounce_pipeline::buffers() const {
  return s_->opt.buffers;
}

result<bounce_pipeline> bounce_pipeline::create(options opt) {
  if (opt.piece_bytes == 0 || opt.buffers == 0)
    return status::invalid_argument("bounce_pipeline: piece_bytes " +
                                    std::to_string(opt.piece_bytes) + " and buffers " +
                                    std::to_string(opt.buffers) + " must both be > 0");
  auto s = std::make_unique<state>();
  s->opt = opt;
  auto st = stream::create();
  if (!st.ok())
    return st.error();
  s->copies = std::move(st).value();
  for (size_t b = 0; b < opt.buffers; ++b) {
    auto buf = pinned_buffer::allocate(opt.piece_bytes);
    if (!buf.ok())
      return buf.error();
    s->pinned.push_back(std::move(buf).value());
    cudaEvent_t e = nullptr;
    KVFERRY_CUDA_TRY("cudaEventCreateWithFlags(cudaEventDisableTiming)",
                     cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    s->done.push_back(e);
  }
  return bounce_pipeline{std::move(s)};
}

status bounce_pipeline::drain(const std::byte* device_src, uint64_t bytes,
                              const ready_piece& on_piece) {
  auto& s = *s_;
  const uint64_t piece = s.opt.piece_bytes;
  const uint64_t n = (bytes + piece - 1) / piece;
  const uint64_t slots = s.opt.buffers;
  auto len = [&](uint64_t i) { return std::min(piece, bytes - i * piece); };
  // Queues the copy of piece i into its buffer and marks its end.
  auto start = [&](uint64_t i) -> status {
    auto b = i % slots;
    KVFERRY_CUDA_TRY("cudaMemcpyAsync(piece " + std::to_string(i) + ", " + std::to_string(len(i)) +
                         " B, to pinned)",
                     cudaMemcpyAsync(s.pinned[b].data(), device_src + i * piece, len(i),
                                     cudaMemcpyDefault, s.copies.handle()));
    KVFERRY_CUDA_TRY("cudaEventRecord", cudaEventRecord(s.done[b], s.copies.handle()));
    return {};
  };
  for (uint64_t i = 0; i < std::min(n, slots); ++i)
    if (auto st = start(i); !st.ok())
      return s.settle(st);
  for (uint64_t i = 0; i < n; ++i) {
    auto b = i % slots;
    if (auto e = cudaEventSynchronize(s.done[b]); e != cudaSuccess)
      return s.settle(cuda_failure("cudaEventSynchronize(piece " + std::to_string(i) + ")", e));
    if (auto st = on_piece(i * piece, {s.pinned[b].data(), len(i)}); !st.ok())
      return s.settle(st);
    // The buffer is free again: the piece N ahead reuses it.
    if (i + slots < n)
      if (auto st = start(i + slots); !st.ok())
        return s.settle(st);
  }
  return {};
}

status bounce_pipeline::fill(std::byte* device_dst, uint64_t bytes, const fill_piece& fill_piece) {
  auto& s = *s_;
  const uint64_t piece = s.opt.piece_bytes;
  const uint64_t n = (bytes + piece - 1) / piece;
  const uint64_t slots = s.opt.buffers;
  for (uint64_t i = 0; i < n; ++i) {
    auto b = i % slots;
    auto len = std::min(piece, bytes - i * piece);
    // The buffer's previous piece (i - N) must have left for the device.
    if (i >= slots)
      if (auto e = cudaEventSynchronize(s.done[b]); e != cudaSuccess)
        return s.settle(
            cuda_failure("cudaEventSynchronize(piece " + std::to_string(i - slots) + ")", e));
    if (auto st = fill_piece(i * piece, {s.pinned[b].data(), len}); !st.ok())
      return s.settle(st);
    auto st = [&]() -> status {
      KVFERRY_CUDA_TRY("cudaMemcpyAsync(piece " + std::to_string(i) + ", " + std::to_string(len) +
                           " B, from pinned)",
                       cudaMemcpyAsync(device_dst + i * piece, s.pinned[b].data(), len,
                                       cudaMemcpyDefault, s.copies.handle()));
      KVFERRY_CUDA_TRY("cudaEventRecord", cudaEventRecord(s.done[b], s.copies.handle()));
      return {};
    }();
    if (!st.ok())
      return s.settle(st);
  }
  return s.settle({});
}

}  // namespace kvferry::transport::cuda
