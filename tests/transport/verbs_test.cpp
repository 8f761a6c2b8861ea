// What only the verbs backend has. Runs where an RDMA device exists; elsewhere
// each case prints "SKIPPED: <why>" (ctest reports it as skipped) and passes,
// as the one case does where the verbs backend was not built (no libibverbs
// at configure time, or -DKVFERRY_VERBS=OFF).
// Where a device exists, tests/transport/conformance_test.cpp runs the shared
// suite on verbs too; the cases here add what is verbs' own.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <iostream>
#include <vector>

#include "tests/support/completion_log.hpp"
#include "tests/support/trusting.hpp"
#include "transport/registry.hpp"

#ifndef KVFERRY_HAVE_VERBS

TEST_CASE("verbs: not built", "[transport][verbs]") {
  std::cout << "SKIPPED: built without libibverbs" << std::endl;
  auto names = kvferry::transport::backend_names();
  CHECK(std::find(names.begin(), names.end(), "verbs") == names.end());
}

#else

#include "transport/verbs/verbs_device.hpp"

using namespace kvferry::transport;
using kvferry::test::completion_log;

namespace {

/// Why verbs cannot run here, or empty where it can.
std::string skip_reason() {
  auto devices = verbs::rdma_devices();
  return devices.ok() ? std::string{} : devices.error().message();
}

/// Two verbs transports: `a` writes into `b`'s region.
struct verbs_pair {
  std::unique_ptr<transport> a, b;
  std::vector<std::byte> src, dst;
  region_id src_id = 0, dst_id = 0;
  peer_id to_b = 0;
  completion_log log;

  explicit verbs_pair(size_t bytes = 1 << 20) : src(bytes), dst(bytes) {
    auto ta = make_transport("verbs", kvferry::test::trusting());
    auto tb = make_transport("verbs", kvferry::test::trusting());
    REQUIRE(ta.ok());
    REQUIRE(tb.ok());
    a = std::move(ta).value();
    b = std::move(tb).value();
    for (size_t i = 0; i < src.size(); ++i)
      src[i] = std::byte(i * 13 + 5);
    src_id = *a->register_region(src.data(), src.size());
    dst_id = *b->register_region(dst.data(), dst.size());
    a->set_completion_handler(log.handler());
    to_b = *a->connect(b->endpoint());
  }

  bool landed(uint64_t src_off, uint64_t dst_off, uint64_t len) const {
    return std::memcmp(src.data() + src_off, dst.data() + dst_off, len) == 0;
  }
};

}  // namespace

TEST_CASE("verbs: the machine's RDMA devices are listed or the reason there are none",
          "[transport][verbs]") {
  auto devices = verbs::rdma_devices();
  if (!devices.ok()) {
    std::cout << "SKIPPED: " << devices.error().message() << std::endl;
    CHECK_THAT(devices.error().message(), Catch::Contains("no RDMA device"));
    return;
  }
  CHECK_FALSE(devices->empty());
  for (auto& name : *devices)
    CHECK_FALSE(name.empty());
}

TEST_CASE("verbs: the registry names the backend and says why it cannot start",
          "[transport][verbs]") {
  auto t = make_transport("verbs", kvferry::test::trusting());
  if (!skip_reason().empty()) {
    std::cout << "SKIPPED: " << skip_reason() << std::endl;
    REQUIRE_FALSE(t.ok());
    CHECK(t.error().message() == "verbs: no RDMA device (ibv_get_device_list found none)");
    return;
  }
  REQUIRE(t.ok());
  CHECK((*t)->name() == "verbs");
  CHECK((*t)->endpoint().rfind("verbs://", 0) == 0);
  CHECK_FALSE((*t)->capabilities().ordered_writes);
}

TEST_CASE("verbs: batches land by RDMA WRITE and refusals name verbs and the peer",
          "[transport][verbs]") {
  if (auto why = skip_reason(); !why.empty()) {
    std::cout << "SKIPPED: " << why << std::endl;
    return;
  }
  verbs_pair p;
  auto peer = "verbs peer " + p.b->endpoint();

  SECTION("several ops, some contiguous (coalesced), land and complete once") {
    std::vector<write_op> ops;
    for (uint64_t k = 0; k < 64; ++k)
      ops.push_back({p.src_id, k * 4096, p.dst_id, 65536 + k * 4096, 4096});  // one run
    ops.push_back({p.src_id, 7, p.dst_id, 3, 100});                           // a stray op
    REQUIRE(p.a->post(p.to_b, write_batch{5, ops}).ok());
    auto done = p.log.wait(1);
    REQUIRE(done.size() == 1);
    CHECK(done[0].cookie == 5u);
    CHECK(done[0].result.ok());
    CHECK(p.landed(0, 65536, 64 * 4096));
    CHECK(p.landed(7, 3, 100));
  }

  SECTION("more work requests than the send queue holds still complete") {
    std::vector<write_op> ops;
    for (uint64_t k = 0; k < 5000; ++k)  // not contiguous: one request each
      ops.push_back({p.src_id, k * 64, p.dst_id, k * 128, 64});
    REQUIRE(p.a->post(p.to_b, write_batch{6, ops}).ok());
    auto done = p.log.wait(1);
    REQUIRE(done.size() == 1);
    CHECK(done[0].result.ok());
    CHECK(p.landed(64 * 4999, 128 * 4999, 64));
  }

  SECTION("a write past the remote region is refused, naming the values") {
    REQUIRE(
        p.a->post(p.to_b, write_batch{8, {{p.src_id, 0, p.dst_id, p.dst.size() - 8, 16}}}).ok());
    auto done = p.log.wait(1);
    REQUIRE(done.size() == 1);
    CHECK(done[0].result.error_code() == code::out_of_bounds);
    CHECK_THAT(done[0].result.message(), Catch::Contains(peer) && Catch::Contains("16 B") &&
                                             Catch::Contains(std::to_string(p.dst.size() - 8)));
  }

  SECTION("fences: a batch lands only while its fence is open, and close knows") {
    REQUIRE(p.a->post(p.to_b, write_batch{1, {{p.src_id, 0, p.dst_id, 0, 64}}, 42}).ok());
    p.b->open_fence(42);
    REQUIRE(p.a->post(p.to_b, write_batch{2, {{p.src_id, 0, p.dst_id, 0, 64}}, 42}).ok());
    auto done = p.log.wait(2);
    REQUIRE(done.size() == 2);
    CHECK(done[0].result.error_code() == code::fenced);
    CHECK(done[1].result.ok());
    CHECK(p.b->close_fence(42));
    REQUIRE(p.a->post(p.to_b, write_batch{3, {{p.src_id, 0, p.dst_id, 0, 64}}, 42}).ok());
    done = p.log.wait(3);
    REQUIRE(done.size() == 3);
    CHECK(done[2].result.error_code() == code::fenced);
  }

  SECTION("a deregistered remote region fails the batch; the next reconnects and lands") {
    auto other = std::vector<std::byte>(4096);
    auto id = *p.b->register_region(other.data(), other.size());
    REQUIRE(p.b->deregister_region(id).ok());
    REQUIRE(p.a->post(p.to_b, write_batch{1, {{p.src_id, 0, id, 0, 64}}}).ok());
    // The receiver drops the sender's connection: the next batch needs a new queue pair.
    p.b->disconnect(p.a->endpoint());
    REQUIRE(p.a->post(p.to_b, write_batch{2, {{p.src_id, 0, p.dst_id, 0, 4096}}}).ok());
    auto done = p.log.wait(2);
    REQUIRE(done.size() == 2);
    CHECK_FALSE(done[0].result.ok());
    if (!done[1].result.ok()) {
      // It may have been in flight on the dropped connection: then the one after lands.
      CHECK_THAT(done[1].result.message(), Catch::Contains(peer));
      REQUIRE(p.a->post(p.to_b, write_batch{3, {{p.src_id, 0, p.dst_id, 0, 4096}}}).ok());
      done = p.log.wait(3);
      REQUIRE(done.size() == 3);
      CHECK(done[2].result.ok());
    }
    CHECK(p.landed(0, 0, 4096));
  }
}

#endif  // KVFERRY_HAVE_VERBS
