#include "apps/bench/suite_cuda.hpp"

#include <string>

#include "apps/bench/bench_report.hpp"

#ifdef KVFERRY_HAVE_CUDA
#include <cuda_runtime.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <vector>

#include "transport/cuda/cuda_bounce.hpp"
#include "transport/cuda/cuda_device.hpp"
#include "transport/cuda/cuda_memory.hpp"
#include "transport/cuda/cuda_segment_copy.hpp"
#include "transport/segment_copy.hpp"
#endif

namespace kvferry::bench {

namespace {

void print_skipped(const std::string& why, bool json) {
  figure f;
  f.suite = "cuda";
  f.metric = "skipped";
  f.notes["reason"] = why;
  print(f, json);
}

}  // namespace

#ifndef KVFERRY_HAVE_CUDA

int run_cuda_suite(const args& a) {
  print_skipped("built without CUDA (no nvcc found at configure time, or KVFERRY_CUDA=OFF)",
                a.json);
  return 0;
}

#else

namespace {

namespace cu = transport::cuda;
using transport::copy_segment;

/// Throws what a failed status says (main prints it after "kvferry-bench: ").
void ok(const transport::status& st) {
  if (!st.ok())
    throw std::runtime_error(st.to_string());
}

template <class T>
T ok(transport::result<T> r) {
  ok(r.error());
  return std::move(r).value();
}

void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

/// GB/s of `iters` runs of `body` (queued on `s`), timed with events; the
/// median of `reps` repetitions after one warm-up.
double gbps(cudaStream_t s, uint64_t bytes, int iters, int reps,
            const std::function<void()>& body) {
  cudaEvent_t start, stop;
  ok(cudaEventCreate(&start), "cudaEventCreate");
  ok(cudaEventCreate(&stop), "cudaEventCreate");
  body();
  ok(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  std::vector<double> xs;
  for (int r = 0; r < reps; ++r) {
    ok(cudaEventRecord(start, s), "cudaEventRecord");
    for (int i = 0; i < iters; ++i)
      body();
    ok(cudaEventRecord(stop, s), "cudaEventRecord");
    ok(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    ok(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    xs.push_back(double(bytes) * iters / (ms * 1e-3) / 1e9);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return median(xs);
}

/// GB/s of a host-side loop (the bounce pipeline runs on the calling thread).
double gbps_host(uint64_t bytes, int reps, const std::function<void()>& body) {
  body();
  std::vector<double> xs;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    body();
    std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
    xs.push_back(double(bytes) / dt.count() / 1e9);
  }
  return median(xs);
}

struct context {
  bool json;
  int reps;
  int iters;
  std::string device;
  cu::stream s;
};

figure base(const context& c, const std::string& metric, const std::string& baseline_name) {
  figure f;
  f.suite = "cuda";
  f.metric = metric;
  f.unit = "GB/s";
  f.reps = c.reps;
  f.baseline_name = baseline_name;
  f.notes["device"] = c.device;
  return f;
}

/// One segment list: the kernel against a device-to-device memcpy of the same
/// bytes, one cudaMemcpyAsync per segment, and (for regular strides) one
/// cudaMemcpy2DAsync.
void segment_figure(context& c, const std::string& metric, const std::vector<copy_segment>& segs,
                    uint64_t src_size, uint64_t dst_size,
                    const std::function<void(std::byte*, const std::byte*)>& as_2d) {
  auto src = ok(cu::device_buffer::allocate(src_size));
  auto dst = ok(cu::device_buffer::allocate(dst_size));
  ok(cu::fill_bytes(src.data(), 0x3c, src_size));
  auto list = ok(cu::segment_list::upload(segs, src_size, dst_size));
  auto bytes = list.bytes();
  auto h = c.s.handle();

  auto f = base(c, metric, "cudaMemcpyAsync device to device of the same bytes");
  f.value = gbps(h, bytes, c.iters, c.reps,
                 [&] { ok(cu::copy_segments(dst.span(), src.span(), list, h)); });
  f.baseline = gbps(h, bytes, c.iters, c.reps, [&] {
    ok(cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice, h),
       "cudaMemcpyAsync");
  });
  f.extra["per_segment_memcpy_gbps"] = gbps(h, bytes, 2, c.reps, [&] {
    for (auto& sg : segs)
      ok(cudaMemcpyAsync(dst.data() + sg.dst_offset, src.data() + sg.src_offset, sg.length,
                         cudaMemcpyDeviceToDevice, h),
         "cudaMemcpyAsync");
  });
  if (as_2d)
    f.extra["memcpy2d_gbps"] =
        gbps(h, bytes, c.iters, c.reps, [&] { as_2d(dst.data(), src.data()); });
  f.extra["segments"] = double(segs.size());
  f.extra["bytes"] = double(bytes);
  f.extra["segment_bytes"] = segs.empty() ? 0 : double(segs.front().length);
  f.extra["iters"] = c.iters;
  print(f, c.json);
}

/// Head slices of a pool of layers x 2 x tokens rows (rank `rank` of `ranks`):
/// the gather on prefill of 1 -> ranks, the scatter on decode of ranks -> 1.
void head_slice_figures(context& c, const std::string& name, uint64_t layers, uint64_t tokens,
                        uint64_t row, uint64_t ranks) {
  uint64_t slice = row / ranks, rows = layers * 2 * tokens, rank = 1;
  std::vector<copy_segment> gather;
  for (uint64_t r = 0; r < rows; ++r)
    gather.push_back({r * row + rank * slice, r * slice, slice});
  auto scatter = gather;
  for (auto& s : scatter)
    std::swap(s.src_offset, s.dst_offset);
  auto h = c.s.handle();
  segment_figure(c, "gather_" + name + "_bandwidth", gather, rows * row, rows * slice,
                 [&](std::byte* d, const std::byte* s) {
                   ok(cudaMemcpy2DAsync(d, slice, s + rank * slice, row, slice, rows,
                                        cudaMemcpyDeviceToDevice, h),
                      "cudaMemcpy2DAsync");
                 });
  segment_figure(c, "scatter_" + name + "_bandwidth", scatter, rows * slice, rows * row,
                 [&](std::byte* d, const std::byte* s) {
                   ok(cudaMemcpy2DAsync(d + rank * slice, row, s, slice, slice, rows,
                                        cudaMemcpyDeviceToDevice, h),
                      "cudaMemcpy2DAsync");
                 });
}

/// Whole pages in a shuffled order (a page-level move of 16-token pages).
void page_figure(context& c, uint64_t pages, uint64_t page_bytes) {
  std::vector<copy_segment> segs;
  for (uint64_t p = 0; p < pages; ++p)
    segs.push_back({p * page_bytes, ((p * 7919) % pages) * page_bytes, page_bytes});
  segment_figure(c, "copy_pages_bandwidth", segs, pages * page_bytes, pages * page_bytes, {});
}

/// The bounce pipeline into (and out of) pageable host memory, against
/// cudaMemcpy between the device and pinned memory.
void bounce_figures(context& c, uint64_t bytes) {
  auto dev = ok(cu::device_buffer::allocate(bytes));
  ok(cu::fill_bytes(dev.data(), 0x5a, bytes));
  auto pinned = ok(cu::pinned_buffer::allocate(bytes));
  std::vector<std::byte> host(bytes, std::byte{1});  // touched: no page faults timed
  auto pipe = ok(cu::bounce_pipeline::create({}));

  auto f = base(c, "bounce_d2h_bandwidth", "cudaMemcpy device to pinned host");
  f.value = gbps_host(bytes, c.reps, [&] {
    ok(pipe.drain(dev.data(), bytes, [&](uint64_t off, std::span<const std::byte> piece) {
      std::memcpy(host.data() + off, piece.data(), piece.size());
      return transport::status{};
    }));
  });
  f.baseline =
      gbps_host(bytes, c.reps, [&] { ok(cu::copy_bytes(pinned.data(), dev.data(), bytes)); });
  f.extra["pageable_memcpy_gbps"] =
      gbps_host(bytes, c.reps, [&] { ok(cu::copy_bytes(host.data(), dev.data(), bytes)); });
  f.extra["bytes"] = double(bytes);
  f.extra["piece_bytes"] = double(pipe.piece_bytes());
  f.extra["buffers"] = double(pipe.buffers());
  print(f, c.json);

  auto g = base(c, "bounce_h2d_bandwidth", "cudaMemcpy pinned host to device");
  g.value = gbps_host(bytes, c.reps, [&] {
    ok(pipe.fill(dev.data(), bytes, [&](uint64_t off, std::span<std::byte> piece) {
      std::memcpy(piece.data(), host.data() + off, piece.size());
      return transport::status{};
    }));
  });
  g.baseline =
      gbps_host(bytes, c.reps, [&] { ok(cu::copy_bytes(dev.data(), pinned.data(), bytes)); });
  g.extra["pageable_memcpy_gbps"] =
      gbps_host(bytes, c.reps, [&] { ok(cu::copy_bytes(dev.data(), host.data(), bytes)); });
  g.extra["bytes"] = double(bytes);
  g.extra["piece_bytes"] = double(pipe.piece_bytes());
  g.extra["buffers"] = double(pipe.buffers());
  print(g, c.json);
}

}  // namespace

int run_cuda_suite(const args& a) {
  if (auto st = cu::cuda_available(); !st.ok()) {
    print_skipped(st.message(), a.json);
    return 0;
  }
  bool quick = a.has("quick");
  auto info = ok(cu::describe_device(0));
  context c{
      .json = a.json,
      .reps = static_cast<int>(a.get("reps", quick ? 3 : 5)),
      .iters = static_cast<int>(a.get("iters", quick ? 20 : 100)),
      .device = info.name + " sm_" + std::to_string(info.cc_major) + std::to_string(info.cc_minor),
      .s = ok(cu::stream::create())};
  uint64_t tokens = a.get("tokens", 64);
  // Llama-7B-shaped MHA: 32 layers, 32 kv heads x 128 x bf16 = 8 KiB rows.
  // TP 4 <-> 1 moves 2 KiB slices; one head of 32 (TP 32, or GQA with kv heads
  // sliced to one per rank) moves 256 B.
  head_slice_figures(c, "2KiB_slices", 32, tokens, 8192, 4);
  head_slice_figures(c, "256B_slices", 32, tokens, 8192, 32);
  page_figure(c, 32 * 2 * (tokens + 15) / 16, 16 * 8192);
  bounce_figures(c, a.get("bounce-bytes", (quick ? 64ull : 256ull) << 20));
  return 0;
}

#endif

}  // namespace kvferry::bench
