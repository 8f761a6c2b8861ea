// The device paths of the host backends on a GPU: KV regions in cudaMalloc'd
// memory written over tcp, shm and inproc by the CUDA device copier (pinned
// bounce pieces, IPC handles, cudaMemcpy), and staging's gather and scatter by
// the kernel between device memory and pinned host memory. The same paths run
// on host memory in tests/transport/device_path_test.cpp; here they run on the
// device, and print "SKIPPED: <why>" where there is none.
#include <catch2/catch.hpp>

#include <cstring>
#include <iostream>
#include <random>
#include <vector>

#include "tests/cuda/segment_shapes.hpp"
#include "tests/support/completion_log.hpp"
#include "tests/support/trusting.hpp"
#include "transport/cuda/cuda_device.hpp"
#include "transport/cuda/cuda_device_copier.hpp"
#include "transport/cuda/cuda_memory.hpp"
#include "transport/registry.hpp"
#include "transport/shared_memory.hpp"

using namespace kvferry;
using namespace kvferry::transport;
using kvferry::test::completion_log;

namespace {

bool skipped() {
  auto st = cuda::cuda_available();
  if (st.ok())
    return false;
  std::cout << "SKIPPED: " << st.message() << std::endl;
  return true;
}

/// A region of either kind: device memory from cudaMalloc, or shared host
/// memory (what every backend can register).
struct test_region {
  memory_kind kind;
  uint64_t size;
  cuda::device_buffer dev;
  shared_memory host;

  test_region(memory_kind k, uint64_t n) : kind(k), size(n) {
    if (k == memory_kind::device) {
      dev = std::move(cuda::device_buffer::allocate(n)).value();
      REQUIRE(cuda::fill_bytes(dev.data(), 0, n).ok());
    } else {
      host = std::move(shared_memory::allocate(n)).value();
    }
  }
  std::byte* data() const { return kind == memory_kind::device ? dev.data() : host.data(); }

  std::vector<std::byte> read() const {
    std::vector<std::byte> out(size);
    REQUIRE(cuda::copy_bytes(out.data(), data(), size).ok());
    return out;
  }
  void write(const std::vector<std::byte>& bytes) {
    REQUIRE(cuda::copy_bytes(data(), bytes.data(), bytes.size()).ok());
  }
};

}  // namespace

TEST_CASE("cuda: tcp shm and inproc write device regions byte for byte", "[cuda][device]") {
  if (skipped())
    return;
  auto copier = cuda::make_cuda_device_copier(0, {.piece_bytes = 1 << 20, .buffers = 3});
  REQUIRE(copier.ok());
  constexpr uint64_t size = 24 << 20;
  auto pattern = kvferry::test::random_bytes(size, 7);
  for (std::string backend : {"tcp", "shm", "inproc"}) {
    for (auto [sk, dk] : {std::pair{memory_kind::host, memory_kind::device},
                          std::pair{memory_kind::device, memory_kind::host},
                          std::pair{memory_kind::device, memory_kind::device}}) {
      INFO(backend << ": " << to_string(sk) << " -> " << to_string(dk));
      options o;
      o.device = *copier;
      auto a = std::move(make_transport(backend, kvferry::test::trusting(o))).value();
      auto b = std::move(make_transport(backend, kvferry::test::trusting(o))).value();
      test_region src{sk, size}, dst{dk, size};
      src.write(pattern);
      auto s = a->register_region(src.data(), size, sk);
      auto d = b->register_region(dst.data(), size, dk);
      REQUIRE(s.ok());
      REQUIRE(d.ok());
      completion_log log;
      a->set_completion_handler(log.handler());
      auto peer = *a->connect(b->endpoint());
      write_batch batch;
      batch.cookie = 1;
      // One op of many pieces, small ops, and ops that abut in memory.
      batch.ops = {{*s, 0, *d, 0, 16 << 20},
                   {*s, 16 << 20, *d, 16 << 20, 4096},
                   {*s, (16 << 20) + 4096, *d, (16 << 20) + 4096, 256},
                   {*s, 20 << 20, *d, 20 << 20, 4 << 20}};
      REQUIRE(a->post(peer, batch).ok());
      auto done = log.wait(1);
      REQUIRE(done.size() == 1);
      CHECK(done[0].result.ok());
      auto got = dst.read();
      uint64_t mismatches = 0;
      for (auto& op : batch.ops)
        mismatches += std::memcmp(got.data() + op.remote_offset, pattern.data() + op.local_offset,
                                  op.length) != 0;
      CHECK(mismatches == 0);
    }
  }
}

TEST_CASE("cuda: the copier gathers from device memory into pinned host memory and back",
          "[cuda][device]") {
  if (skipped())
    return;
  auto copier = std::move(cuda::make_cuda_device_copier(0)).value();
  constexpr uint64_t pool = 8 << 20, ring = 2 << 20;
  auto pattern = kvferry::test::random_bytes(pool, 3);
  test_region kv{memory_kind::device, pool};
  kv.write(pattern);
  auto staging = std::move(shared_memory::allocate(ring)).value();
  REQUIRE(copier->pin_host(staging.data(), ring).ok());
  // Head slices of 256 B out of 1 KiB rows: staging's gather.
  std::vector<copy_segment> gather;
  for (uint64_t row = 0; row < ring / 256; ++row)
    gather.push_back({row * 1024 + 512, row * 256, 256});
  REQUIRE(copier->copy_segments({staging.data(), ring}, {kv.data(), pool}, gather).ok());
  std::vector<std::byte> expect(ring);
  REQUIRE(copy_segments_cpu(expect, pattern, gather).ok());
  CHECK(std::memcmp(staging.data(), expect.data(), ring) == 0);
  // And the scatter back into another device buffer.
  test_region out{memory_kind::device, pool};
  std::vector<copy_segment> scatter;
  for (auto& g : gather)
    scatter.push_back({g.dst_offset, g.src_offset, g.length});
  REQUIRE(copier->copy_segments({out.data(), pool}, {staging.data(), ring}, scatter).ok());
  auto got = out.read();
  std::vector<std::byte> want(pool);
  REQUIRE(copy_segments_cpu(want, expect, scatter).ok());
  CHECK(got == want);
  copier->unpin_host(staging.data());
}
