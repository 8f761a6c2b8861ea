// The host backends' device paths (transport/device_memory.hpp): regions
// registered as device memory are never touched by the backend itself, only
// through the device copier. Run here with host_device_copier, whose "device"
// memory is host memory and whose counters show that every byte went through
// its pieces; tests/cuda/cuda_test.cpp runs the same paths on a GPU.
#include <catch2/catch.hpp>

#include <cstring>

#include "tests/support/completion_log.hpp"
#include "tests/support/trusting.hpp"
#include "transport/base/host_device_copier.hpp"
#include "transport/registry.hpp"
#include "transport/shared_memory.hpp"

using namespace kvferry;
using namespace kvferry::transport;
using kvferry::test::completion_log;

namespace {

constexpr uint64_t piece = 4096;

/// `a` writes from `src` into `b`'s `dst`; either may be registered as device
/// memory. Each side has its own copier.
struct device_pair {
  std::shared_ptr<host_device_copier> copier_a, copier_b;
  std::unique_ptr<transport::transport> a, b;
  shared_memory src, dst;
  region_id src_id = 0, dst_id = 0;
  peer_id to_b = 0;
  completion_log log;

  device_pair(const std::string& backend, memory_kind src_kind, memory_kind dst_kind,
              host_device_copier::options a_opt = {.piece_bytes = piece},
              host_device_copier::options b_opt = {.piece_bytes = piece})
      : copier_a(std::make_shared<host_device_copier>(a_opt)),
        copier_b(std::make_shared<host_device_copier>(b_opt)),
        src(std::move(shared_memory::allocate(1 << 18)).value()),
        dst(std::move(shared_memory::allocate(1 << 18)).value()) {
    options oa, ob;
    oa.device = copier_a;
    ob.device = copier_b;
    a = std::move(make_transport(backend, kvferry::test::trusting(oa))).value();
    b = std::move(make_transport(backend, kvferry::test::trusting(ob))).value();
    for (size_t i = 0; i < src.size(); ++i)
      src.data()[i] = std::byte(i * 13 + 5);
    auto s = a->register_region(src.data(), src.size(), src_kind);
    auto d = b->register_region(dst.data(), dst.size(), dst_kind);
    REQUIRE(s.ok());
    REQUIRE(d.ok());
    src_id = *s;
    dst_id = *d;
    a->set_completion_handler(log.handler());
    to_b = *a->connect(b->endpoint());
  }

  bool landed(uint64_t src_off, uint64_t dst_off, uint64_t len) const {
    return std::memcmp(src.data() + src_off, dst.data() + dst_off, len) == 0;
  }
};

/// Ops of every shape: many pieces, less than a piece, runs contiguous on
/// either side, an empty op.
write_batch mixed_batch(const device_pair& p, uint64_t cookie) {
  write_batch b;
  b.cookie = cookie;
  b.ops = {{p.src_id, 0, p.dst_id, 1000, 5 * piece + 123},
           {p.src_id, 5 * piece + 123, p.dst_id, 1000 + 5 * piece + 123, 77},
           {p.src_id, 100000, p.dst_id, 150000, 300},
           {p.src_id, 100300, p.dst_id, 200000, 0},
           {p.src_id, 120000, p.dst_id, 60003, 2 * piece}};
  return b;
}

bool all_landed(const device_pair& p) {
  return p.landed(0, 1000, 5 * piece + 200) && p.landed(100000, 150000, 300) &&
         p.landed(120000, 60003, 2 * piece);
}

}  // namespace

TEST_CASE("device regions move through the copier on tcp and shm and inproc",
          "[transport][device]") {
  for (std::string backend : {"tcp", "shm", "inproc"}) {
    for (auto [sk, dk] : {std::pair{memory_kind::host, memory_kind::device},
                          std::pair{memory_kind::device, memory_kind::host},
                          std::pair{memory_kind::device, memory_kind::device}}) {
      INFO(backend << ": " << to_string(sk) << " -> " << to_string(dk));
      device_pair p{backend, sk, dk};
      REQUIRE(p.a->post(p.to_b, mixed_batch(p, 7)).ok());
      auto done = p.log.wait(1);
      REQUIRE(done.size() == 1);
      CHECK(done[0].result.ok());
      CHECK(done[0].cookie == 7);
      CHECK(all_landed(p));
      auto a = p.copier_a->counted();
      auto b = p.copier_b->counted();
      if (backend == "tcp") {
        // The sender reads device memory in pieces, the receiver writes it.
        CHECK((a.pieces_read > 0) == (sk == memory_kind::device));
        CHECK((b.pieces_written > 0) == (dk == memory_kind::device));
        if (sk == memory_kind::device)
          CHECK(a.pieces_read >= (5 * piece + 200) / piece);
      } else {
        // shm and inproc copy with the sender's copier wherever a device end
        // is; shm maps a device destination by the receiver's handle.
        CHECK(a.copies > 0);
        CHECK(b.copies == 0);
        if (backend == "shm")
          CHECK((a.opened > 0) == (dk == memory_kind::device));
      }
    }
  }
}

TEST_CASE("device memory without a copier is refused at registration", "[transport][device]") {
  for (std::string backend : {"tcp", "inproc", "shm"}) {
    INFO(backend);
    auto t = std::move(make_transport(backend, kvferry::test::trusting())).value();
    auto mem = std::move(shared_memory::allocate(4096)).value();
    auto id = t->register_region(mem.data(), mem.size(), memory_kind::device);
    REQUIRE_FALSE(id.ok());
    CHECK(id.error().error_code() == code::invalid_argument);
    CHECK_THAT(id.error().message(), Catch::Contains("device memory"));
    CHECK(t->register_region(mem.data(), mem.size(), memory_kind::host).ok());
  }
}

TEST_CASE("a device copy that fails on the receiver refuses that batch only",
          "[transport][device]") {
  // Piece 3 of the receiver's copier fails: inside the first batch.
  device_pair p{"tcp",
                memory_kind::host,
                memory_kind::device,
                {.piece_bytes = piece},
                {.piece_bytes = piece, .fail_piece = 3}};
  REQUIRE(p.a->post(p.to_b, mixed_batch(p, 1)).ok());
  REQUIRE(p.a->post(p.to_b, mixed_batch(p, 2)).ok());
  auto done = p.log.wait(2);
  REQUIRE(done.size() == 2);
  CHECK(done[0].result.error_code() == code::io_error);
  CHECK_THAT(done[0].result.message(), Catch::Contains("injected fault at piece 3"));
  // The failed batch's bytes were read off the stream: the next one lands.
  CHECK(done[1].result.ok());
  CHECK(all_landed(p));
}

TEST_CASE("a device read that fails on the sender fails its batch and the next reconnects",
          "[transport][device]") {
  device_pair p{
      "tcp", memory_kind::device, memory_kind::host, {.piece_bytes = piece, .fail_piece = 2}};
  REQUIRE(p.a->post(p.to_b, mixed_batch(p, 1)).ok());
  auto first = p.log.wait(1);
  REQUIRE(first.size() == 1);
  CHECK(first[0].result.error_code() == code::io_error);
  CHECK_THAT(first[0].result.message(), Catch::Contains("injected fault at piece 2"));
  REQUIRE(p.a->post(p.to_b, mixed_batch(p, 2)).ok());
  auto both = p.log.wait(2);
  REQUIRE(both.size() == 2);
  CHECK(both[1].result.ok());
  CHECK(all_landed(p));
}
