// The CUDA data plane (transport/cuda/): the segment-copy kernel against the
// CPU reference (copy_segments_cpu) for staging-shaped and random lists, the
// pinned bounce pipeline, and CUDA IPC across two processes. Runs where a GPU
// is; elsewhere each case that needs one prints "SKIPPED: <why>" (ctest then
// reports the test as skipped) and passes. Refusals made before any CUDA call
// run everywhere.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "tests/cuda/segment_shapes.hpp"
#include "transport/cuda/cuda_bounce.hpp"
#include "transport/cuda/cuda_device.hpp"
#include "transport/cuda/cuda_ipc.hpp"
#include "transport/cuda/cuda_memory.hpp"
#include "transport/cuda/cuda_segment_copy.hpp"
#include "transport/cuda/cuda_segment_copy_lanes.cuh"
#include "transport/segment_copy.hpp"

using namespace kvferry::transport;
using kvferry::test::head_slices;
using kvferry::test::random_bytes;
using kvferry::test::random_segments;

namespace {

/// Why no CUDA device can be used here; empty where one can.
std::string skip_reason() {
  auto st = cuda::cuda_available();
  return st.ok() ? std::string{} : st.message();
}

#define SKIP_WITHOUT_GPU()                          \
  do {                                              \
    if (auto why = skip_reason(); !why.empty()) {   \
      std::cout << "SKIPPED: " << why << std::endl; \
      return;                                       \
    }                                               \
  } while (0)

/// A device buffer holding `bytes`.
cuda::device_buffer to_device(const std::vector<std::byte>& bytes) {
  auto buf = cuda::device_buffer::allocate(bytes.size());
  REQUIRE(buf.ok());
  REQUIRE(cuda::copy_bytes(buf->data(), bytes.data(), bytes.size()).ok());
  return std::move(buf).value();
}

std::vector<std::byte> to_host(const cuda::device_buffer& buf) {
  std::vector<std::byte> out(buf.size());
  REQUIRE(cuda::copy_bytes(out.data(), buf.data(), buf.size()).ok());
  return out;
}

/// Runs `segs` from `src` into `dst` on the CPU and on the GPU (both the
/// uploaded-list and the one-shot forms) and checks every byte of the
/// destination, copied or not, is the same.
void check_against_cpu(const std::vector<std::byte>& src, const std::vector<std::byte>& dst,
                       const std::vector<copy_segment>& segs) {
  auto want = dst;
  REQUIRE(copy_segments_cpu(want, src, segs).ok());

  auto s = cuda::stream::create();
  REQUIRE(s.ok());
  auto dsrc = to_device(src);
  {
    auto ddst = to_device(dst);
    auto list = cuda::segment_list::upload(segs, src.size(), dst.size());
    REQUIRE(list.ok());
    CHECK(list->count() == segs.size());
    CHECK(list->bytes() == total_bytes(segs));
    auto st = cuda::copy_segments(ddst.span(), dsrc.span(), *list, s->handle());
    INFO(st.to_string());
    REQUIRE(st.ok());
    REQUIRE(s->synchronize().ok());
    CHECK(to_host(ddst) == want);
  }
  {
    auto ddst = to_device(dst);
    auto st = cuda::copy_segments(ddst.span(), dsrc.span(), std::span<const copy_segment>{segs},
                                  s->handle());
    INFO(st.to_string());
    REQUIRE(st.ok());
    REQUIRE(s->synchronize().ok());
    CHECK(to_host(ddst) == want);
  }
}

/// The kernel run on the CPU: every lane of every tile, one after another
/// (lanes share nothing and write disjoint bytes).
void emulate_kernel(std::vector<std::byte>& dst, const std::vector<std::byte>& src,
                    const std::vector<copy_segment>& segs) {
  auto first = cuda::lanes::first_tiles(segs);
  auto* d = reinterpret_cast<unsigned char*>(dst.data());
  auto* s = reinterpret_cast<const unsigned char*>(src.data());
  for (uint64_t t = 0; t < first.back(); ++t)
    for (int lane = 0; lane < cuda::lanes::warp_size; ++lane)
      cuda::lanes::copy_list_tile(d, s, segs.data(), first.data(), segs.size(), t, lane);
}

/// The emulated kernel gives what copy_segments_cpu gives, byte for byte.
void check_emulation(const std::vector<std::byte>& src, const std::vector<std::byte>& dst,
                     const std::vector<copy_segment>& segs) {
  auto want = dst;
  REQUIRE(copy_segments_cpu(want, src, segs).ok());
  auto got = dst;
  emulate_kernel(got, src, segs);
  CHECK(got == want);
}

std::string hex(const cuda::ipc_handle& h) {
  std::string out;
  char buf[3];
  for (auto b : h) {
    std::snprintf(buf, sizeof(buf), "%02x", unsigned(b));
    out += buf;
  }
  return out;
}

}  // namespace

TEST_CASE("cuda: the probe names a usable device or says why there is none", "[cuda]") {
  auto st = cuda::cuda_available();
  if (!st.ok()) {
    // The reason is CUDA's own, after the call that failed.
    CHECK(st.error_code() == code::io_error);
    CHECK(st.message().find("cuda") != std::string::npos);
    std::cout << "SKIPPED: " << st.message() << std::endl;
    return;
  }
  auto info = cuda::describe_device(0);
  REQUIRE(info.ok());
  std::cout << "cuda device 0: " << info->name << ", sm_" << info->cc_major << info->cc_minor
            << ", " << (info->total_memory >> 20) << " MiB, " << info->multiprocessors << " SMs, "
            << info->device_count << " device(s)" << std::endl;
  CHECK(info->device_count >= 1);
}

TEST_CASE("cuda: segment lists out of bounds are refused before any CUDA call", "[cuda]") {
  std::vector<copy_segment> segs{{0, 0, 16}, {4090, 0, 16}};
  auto list = cuda::segment_list::upload(segs, 4096, 4096);
  REQUIRE_FALSE(list.ok());
  CHECK(list.error().message() ==
        "copy segment 1: src_offset 4090 + length 16 past the source (4096 B)");
  std::vector<std::byte> a(4096), b(4096);
  auto st = cuda::copy_segments(a, b, std::span<const copy_segment>{segs}, nullptr);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error_code() == code::out_of_bounds);
  CHECK(cuda::ipc_handle_from_bytes(std::vector<std::byte>(63)).error().message() ==
        "ipc handle of 63 B, expected 64 B");
}

TEST_CASE("cuda: the kernel's lanes run on the CPU match the reference", "[cuda]") {
  // No GPU needed: the per-lane code the kernel runs (cuda_segment_copy_lanes.cuh),
  // for every alignment class (16, 8, 4, 1 bytes), head slices and random lists.
  for (uint64_t src_off : {0, 1, 4, 8, 16, 17})
    for (uint64_t dst_off : {0, 3, 4, 8, 16, 33})
      for (uint64_t len : {0, 1, 15, 16, 17, 100, 4095, 4096, 4097, 20000}) {
        INFO(src_off << " -> " << dst_off << ", " << len << " B");
        check_emulation(random_bytes(src_off + len + 5, len), random_bytes(dst_off + len + 9, 1),
                        {{src_off, dst_off, len}});
      }
  head_slices shape{.layers = 4, .tokens = 64, .row_bytes = 8192, .ranks = 4, .rank = 2};
  auto pool = random_bytes(shape.pool_bytes(), 1);
  auto slot = random_bytes(shape.slot_bytes(), 2);
  check_emulation(pool, slot, shape.gather());
  check_emulation(slot, pool, shape.scatter());
  std::mt19937_64 rng{5};
  for (int round = 0; round < 8; ++round) {
    uint64_t src_size = 1 + rng() % (1 << 20), dst_size = 1 + rng() % (1 << 20);
    auto segs = random_segments(rng, 1 + rng() % 3000, round % 2 ? 300 : 70000, src_size, dst_size);
    INFO("round " << round << ": " << segs.size() << " segments");
    check_emulation(random_bytes(src_size, round), random_bytes(dst_size, 50 + round), segs);
  }
}

TEST_CASE("cuda: device and pinned buffers allocate move and copy", "[cuda]") {
  SKIP_WITHOUT_GPU();
  auto d = cuda::device_buffer::allocate(1 << 20);
  REQUIRE(d.ok());
  auto moved = std::move(d).value();
  CHECK(moved.size() == (1u << 20));
  auto p = cuda::pinned_buffer::allocate(1 << 20);
  REQUIRE(p.ok());
  auto bytes = random_bytes(1 << 20, 3);
  std::memcpy(p->data(), bytes.data(), bytes.size());
  REQUIRE(cuda::copy_bytes(moved.data(), p->data(), bytes.size()).ok());
  REQUIRE(cuda::fill_bytes(moved.data(), 0x5a, 100).ok());
  auto back = to_host(moved);
  for (int i = 0; i < 100; ++i)
    bytes[i] = std::byte{0x5a};
  CHECK(back == bytes);
  CHECK(cuda::device_buffer::allocate(0).ok());

  // An allocation the device cannot hold says which call and CUDA's words.
  auto huge = cuda::device_buffer::allocate(size_t{1} << 52);
  REQUIRE_FALSE(huge.ok());
  CHECK(huge.error().message().rfind("cudaMalloc(4503599627370496 B): ", 0) == 0);
  // And the failure does not poison the next call.
  CHECK(cuda::device_buffer::allocate(4096).ok());
}

TEST_CASE("cuda: the segment kernel matches the CPU for head-sliced gathers and scatters",
          "[cuda]") {
  SKIP_WITHOUT_GPU();
  // 4 -> 1 and 1 -> 4 MHA (32 heads x 128 x bf16 = 8 KiB rows, 2 KiB slices),
  // one head of 8 (256 B slices), and fp8 with 16 B slices.
  for (auto shape :
       {head_slices{.layers = 32, .tokens = 64, .row_bytes = 8192, .ranks = 4, .rank = 1},
        head_slices{.layers = 8, .tokens = 33, .row_bytes = 2048, .ranks = 8, .rank = 7},
        head_slices{.layers = 4, .tokens = 100, .row_bytes = 128, .ranks = 8, .rank = 3}}) {
    INFO("slice " << shape.slice() << " B of " << shape.row_bytes << " B rows");
    auto pool = random_bytes(shape.pool_bytes(), shape.slice());
    auto slot = random_bytes(shape.slot_bytes(), shape.slice() + 1);
    check_against_cpu(pool, slot, shape.gather());
    check_against_cpu(slot, pool, shape.scatter());
  }
}

TEST_CASE("cuda: the segment kernel matches the CPU for random unaligned lists", "[cuda]") {
  SKIP_WITHOUT_GPU();
  std::mt19937_64 rng{11};
  for (int round = 0; round < 12; ++round) {
    uint64_t src_size = 1 + rng() % (4 << 20), dst_size = 1 + rng() % (4 << 20);
    uint64_t max_len = round % 3 == 0 ? 64 : round % 3 == 1 ? 5000 : 300000;
    auto segs = random_segments(rng, 1 + rng() % 20000, max_len, src_size, dst_size);
    INFO("round " << round << ": " << segs.size() << " segments up to " << max_len << " B");
    check_against_cpu(random_bytes(src_size, round), random_bytes(dst_size, 100 + round), segs);
  }
}

TEST_CASE("cuda: the segment kernel copies large segments and empty lists", "[cuda]") {
  SKIP_WITHOUT_GPU();
  uint64_t mib = 1 << 20;
  auto src = random_bytes(40 * mib + 77, 5);
  auto dst = random_bytes(40 * mib + 300, 6);
  // Whole pages at odd and aligned offsets, one zero length, one of a byte.
  std::vector<copy_segment> segs{{0, 0, 16 * mib},
                                 {16 * mib + 3, 16 * mib + 3, 8 * mib + 5},
                                 {24 * mib + 77, 24 * mib + 200, 16 * mib},
                                 {5, 40 * mib + 250, 0},
                                 {7, 40 * mib + 299, 1}};
  check_against_cpu(src, dst, segs);
  check_against_cpu(src, dst, {});
}

TEST_CASE("cuda: the bounce pipeline drains and fills byte for byte", "[cuda]") {
  SKIP_WITHOUT_GPU();
  for (size_t buffers : {1, 2, 3}) {
    auto p = cuda::bounce_pipeline::create({.piece_bytes = 64 * 1024, .buffers = buffers});
    REQUIRE(p.ok());
    for (uint64_t bytes : {uint64_t{0}, uint64_t{1}, uint64_t{64 * 1024 - 1}, uint64_t{64 * 1024},
                           uint64_t{10 * 64 * 1024 + 12345}}) {
      INFO(buffers << " buffers, " << bytes << " B");
      auto data = random_bytes(bytes, bytes + buffers);
      auto dev = cuda::device_buffer::allocate(bytes);
      REQUIRE(dev.ok());
      REQUIRE(cuda::copy_bytes(dev->data(), data.data(), bytes).ok());

      // drain: pieces in order, each the next bytes of the region.
      std::vector<std::byte> out;
      auto st = p->drain(dev->data(), bytes, [&](uint64_t off, std::span<const std::byte> piece) {
        CHECK(off == out.size());
        out.insert(out.end(), piece.begin(), piece.end());
        return status{};
      });
      REQUIRE(st.ok());
      CHECK(out == data);

      // fill: the reverse, into a cleared region.
      auto back = cuda::device_buffer::allocate(bytes);
      REQUIRE(back.ok());
      if (bytes > 0)
        REQUIRE(cuda::fill_bytes(back->data(), 0, bytes).ok());
      st = p->fill(back->data(), bytes, [&](uint64_t off, std::span<std::byte> piece) {
        std::memcpy(piece.data(), data.data() + off, piece.size());
        return status{};
      });
      REQUIRE(st.ok());
      CHECK(to_host(*back) == data);
    }
  }
}

TEST_CASE("cuda: a bounce callback's error stops the pipeline which stays usable", "[cuda]") {
  SKIP_WITHOUT_GPU();
  auto p = cuda::bounce_pipeline::create({.piece_bytes = 4096, .buffers = 2});
  REQUIRE(p.ok());
  auto data = random_bytes(10 * 4096, 9);
  auto dev = to_device(data);
  int calls = 0;
  auto st = p->drain(dev.data(), data.size(), [&](uint64_t, std::span<const std::byte>) {
    return ++calls == 3 ? status::connection_lost("peer gone") : status{};
  });
  CHECK(st.error_code() == code::connection_lost);
  CHECK(calls == 3);
  std::vector<std::byte> out;
  st = p->drain(dev.data(), data.size(), [&](uint64_t, std::span<const std::byte> piece) {
    out.insert(out.end(), piece.begin(), piece.end());
    return status{};
  });
  REQUIRE(st.ok());
  CHECK(out == data);
  CHECK(cuda::bounce_pipeline::create({.piece_bytes = 0, .buffers = 2}).error().error_code() ==
        code::invalid_argument);
}

TEST_CASE("cuda: a device buffer exported by IPC is read and written by another process",
          "[cuda]") {
  SKIP_WITHOUT_GPU();
  constexpr size_t bytes = 1 << 20;
  std::vector<unsigned char> pattern(bytes);
  for (size_t i = 0; i < bytes; ++i)
    pattern[i] = static_cast<unsigned char>(i * 7 + 3);
  auto dev = cuda::device_buffer::allocate(bytes);
  REQUIRE(dev.ok());
  REQUIRE(cuda::copy_bytes(dev->data(), pattern.data(), bytes).ok());
  auto handle = cuda::export_ipc_handle(*dev);
  REQUIRE(handle.ok());

  // fork + exec: the child starts CUDA afresh (it does not survive a fork).
  auto h = hex(*handle);
  auto size = std::to_string(bytes);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    execl(KVFERRY_CUDA_IPC_PEER, KVFERRY_CUDA_IPC_PEER, h.c_str(), size.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  int wstatus = 0;
  REQUIRE(waitpid(pid, &wstatus, 0) == pid);
  REQUIRE(WIFEXITED(wstatus));
  REQUIRE(WEXITSTATUS(wstatus) == 0);

  std::vector<unsigned char> back(bytes);
  REQUIRE(cuda::copy_bytes(back.data(), dev->data(), bytes).ok());
  for (size_t i = 0; i < bytes; ++i)
    pattern[i] = static_cast<unsigned char>(i * 11 + 5);
  CHECK(back == pattern);
}
