// One suite, every backend built into this binary (transport/registry): what a
// write does, what it refuses and how it completes is the same everywhere.
#include <catch2/catch.hpp>

#include <cstring>
#include <numeric>
#include <thread>

#include "tests/support/completion_log.hpp"
#include "tests/support/trusting.hpp"
#include "transport/registry.hpp"
#include "transport/shared_memory.hpp"

using namespace kvferry;
using namespace kvferry::transport;
using kvferry::test::completion_log;

namespace {

/// `n` bytes of shared memory (what every backend can register), as a span.
struct test_buffer {
  explicit test_buffer(size_t n) : mem(std::move(shared_memory::allocate(n)).value()) {}
  std::byte* data() const { return mem.data(); }
  size_t size() const { return mem.size(); }
  std::byte& operator[](size_t i) const { return mem.data()[i]; }
  shared_memory mem;
};

/// Two transports of one backend: `a` writes into `b`'s regions.
struct pair {
  std::unique_ptr<transport::transport> a, b;
  test_buffer src, dst;
  region_id src_id = 0, dst_id = 0;
  peer_id to_b = 0;
  completion_log log;

  explicit pair(const std::string& backend, size_t bytes = 1 << 16) : src(bytes), dst(bytes) {
    auto ta = make_transport(backend, kvferry::test::trusting());
    auto tb = make_transport(backend, kvferry::test::trusting());
    REQUIRE(ta.ok());
    REQUIRE(tb.ok());
    a = std::move(ta).value();
    b = std::move(tb).value();
    for (size_t i = 0; i < src.size(); ++i)
      src[i] = std::byte(i * 7 + 3);
    auto s = a->register_region(src.data(), src.size());
    auto d = b->register_region(dst.data(), dst.size());
    REQUIRE(s.ok());
    REQUIRE(d.ok());
    src_id = *s;
    dst_id = *d;
    a->set_completion_handler(log.handler());
    auto p = a->connect(b->endpoint());
    REQUIRE(p.ok());
    to_b = *p;
  }

  bool landed(uint64_t src_off, uint64_t dst_off, uint64_t len) const {
    return std::memcmp(src.data() + src_off, dst.data() + dst_off, len) == 0;
  }

  bool zero(uint64_t off, uint64_t len) const {
    for (uint64_t i = off; i < off + len; ++i)
      if (dst[i] != std::byte{0})
        return false;
    return true;
  }
};

/// The built-in backends this machine can run: verbs needs an RDMA device
/// (tests/transport/verbs_test.cpp says SKIPPED where there is none).
std::vector<std::string> runnable_backends() {
  std::vector<std::string> out;
  for (auto& name : backend_names()) {
    if (name == "verbs" && !make_transport(name, kvferry::test::trusting()).ok())
      continue;
    out.push_back(name);
  }
  return out;
}

}  // namespace

TEST_CASE("backends: writes land and refusals name the values and completions come once",
          "[transport][conformance]") {
  auto backend = GENERATE(from_range(runnable_backends()));
  CAPTURE(backend);
  pair p{backend};

  SECTION("a batch of several ops lands and completes with its cookie") {
    write_batch b{7, {{p.src_id, 0, p.dst_id, 4096, 100}, {p.src_id, 200, p.dst_id, 0, 50}}};
    REQUIRE(p.a->post(p.to_b, b).ok());
    auto done = p.log.wait(1);
    REQUIRE(done.size() == 1);
    CHECK(done[0].cookie == 7u);
    CHECK(done[0].result.ok());
    CHECK(p.landed(0, 4096, 100));
    CHECK(p.landed(200, 0, 50));
    CHECK(p.zero(50, 4046));
  }

  SECTION("a write past the remote region is refused and writes nothing of its batch") {
    write_batch b{1, {{p.src_id, 0, p.dst_id, 0, 64}, {p.src_id, 0, p.dst_id, (1 << 16) - 10, 11}}};
    REQUIRE(p.a->post(p.to_b, b).ok());
    auto done = p.log.wait(1);
    REQUIRE(done.size() == 1);
    CHECK(done[0].result.error_code() == code::out_of_bounds);
    CHECK_THAT(done[0].result.message(), Catch::Contains("write of 11 B at offset 65526 past") &&
                                             Catch::Contains("(65536 B)"));
    CHECK(p.zero(0, 1 << 16));
  }

  SECTION("an offset that would overflow is out of bounds, not a wrap-around") {
    write_batch b{1, {{p.src_id, 0, p.dst_id, UINT64_MAX - 8, 16}}};
    REQUIRE(p.a->post(p.to_b, b).ok());
    auto done = p.log.wait(1);
    REQUIRE(done.size() == 1);
    CHECK(done[0].result.error_code() == code::out_of_bounds);
  }

  SECTION("an unknown remote region is refused") {
    write_batch b{2, {{p.src_id, 0, p.dst_id + 1000, 0, 8}}};
    REQUIRE(p.a->post(p.to_b, b).ok());
    auto done = p.log.wait(1);
    REQUIRE(done.size() == 1);
    CHECK(done[0].result.error_code() == code::unknown_region);
  }

  SECTION("a read past the local region is refused") {
    write_batch b{3, {{p.src_id, (1 << 16) - 4, p.dst_id, 0, 8}}};
    REQUIRE(p.a->post(p.to_b, b).ok());
    auto done = p.log.wait(1);
    REQUIRE(done.size() == 1);
    CHECK(done[0].result.error_code() == code::out_of_bounds);
    CHECK_THAT(done[0].result.message(), Catch::Contains("local region"));
  }

  SECTION("a deregistered region takes no more writes; earlier ones stay") {
    REQUIRE(p.a->post(p.to_b, write_batch{1, {{p.src_id, 0, p.dst_id, 0, 32}}}).ok());
    REQUIRE(p.log.wait(1).size() == 1);
    REQUIRE(p.b->deregister_region(p.dst_id).ok());
    REQUIRE(p.a->post(p.to_b, write_batch{2, {{p.src_id, 0, p.dst_id, 64, 32}}}).ok());
    auto done = p.log.wait(2);
    REQUIRE(done.size() == 2);
    CHECK(done[1].result.error_code() == code::unknown_region);
    CHECK(p.landed(0, 0, 32));
    CHECK(p.zero(64, 32));
    CHECK(p.b->deregister_region(p.dst_id).error_code() == code::unknown_region);
  }

  SECTION("the connection survives a refused batch") {
    REQUIRE(p.a->post(p.to_b, write_batch{1, {{p.src_id, 0, p.dst_id, 1 << 20, 8}}}).ok());
    REQUIRE(p.a->post(p.to_b, write_batch{2, {{p.src_id, 8, p.dst_id, 8, 8}}}).ok());
    auto done = p.log.wait(2);
    REQUIRE(done.size() == 2);
    CHECK_FALSE(done[0].result.ok());
    CHECK(done[1].result.ok());
    CHECK(p.landed(8, 8, 8));
  }

  SECTION("many batches complete exactly once, in post order") {
    constexpr uint64_t n = 300;
    for (uint64_t i = 0; i < n; ++i)
      REQUIRE(
          p.a->post(p.to_b, write_batch{i, {{p.src_id, i * 128, p.dst_id, i * 128, 128}}}).ok());
    auto done = p.log.wait(n);
    REQUIRE(done.size() == n);
    for (uint64_t i = 0; i < n; ++i) {
      CHECK(done[i].cookie == i);
      CHECK(done[i].result.ok());
    }
    CHECK(p.landed(0, 0, n * 128));
  }

  SECTION("zero-length ops and empty batches complete") {
    REQUIRE(p.a->post(p.to_b, write_batch{5, {{p.src_id, 0, p.dst_id, 0, 0}}}).ok());
    REQUIRE(p.a->post(p.to_b, write_batch{6, {}}).ok());
    auto done = p.log.wait(2);
    REQUIRE(done.size() == 2);
    CHECK(done[0].result.ok());
    CHECK(done[1].result.ok());
  }

  SECTION("posting to a peer never connected fails at once, without a completion") {
    auto st = p.a->post(p.to_b + 5, write_batch{1, {}});
    CHECK(st.error_code() == code::unknown_peer);
    std::this_thread::sleep_for(std::chrono::milliseconds{20});
    CHECK(p.log.size() == 0);
  }

  SECTION("a malformed endpoint is refused by connect") {
    auto bad = p.a->connect("nonsense");
    CHECK(bad.error().error_code() == code::invalid_argument);
    CHECK_THAT(bad.error().message(), Catch::Contains("'nonsense'"));
  }

  SECTION("a batch writes only while its fence is open at the receiver") {
    write_batch b{1, {{p.src_id, 0, p.dst_id, 0, 16}}, 77};
    REQUIRE(p.a->post(p.to_b, b).ok());  // never opened
    REQUIRE(p.log.wait(1).size() == 1);
    p.b->open_fence(77);
    b.cookie = 2;
    REQUIRE(p.a->post(p.to_b, b).ok());
    auto done = p.log.wait(2);
    REQUIRE(done.size() == 2);
    CHECK(done[0].result.error_code() == code::fenced);
    CHECK(done[1].result.ok());
    CHECK(p.landed(0, 0, 16));
    CHECK(p.b->close_fence(77));  // nothing with it in progress
    b = write_batch{3, {{p.src_id, 0, p.dst_id, 32, 16}}, 77};
    REQUIRE(p.a->post(p.to_b, b).ok());
    done = p.log.wait(3);
    REQUIRE(done.size() == 3);
    CHECK(done[2].result.error_code() == code::fenced);
    CHECK_THAT(done[2].result.message(), Catch::Contains("fence 77 is closed"));
    CHECK(p.zero(32, 16));
    // Fence 0 is no fence: always written.
    REQUIRE(p.a->post(p.to_b, write_batch{4, {{p.src_id, 0, p.dst_id, 64, 8}}, 0}).ok());
    CHECK(p.log.wait(4)[3].result.ok());
  }

  SECTION("invalid regions are refused") {
    CHECK(p.a->register_region(nullptr, 64).error().error_code() == code::invalid_argument);
    CHECK(p.a->register_region(p.src.data(), 0).error().error_code() == code::invalid_argument);
  }
}

TEST_CASE("backends: a peer that is gone fails the batches sent to it",
          "[transport][conformance]") {
  auto backend = GENERATE(from_range(runnable_backends()));
  CAPTURE(backend);
  std::string dead_endpoint;
  {
    auto gone = make_transport(backend, kvferry::test::trusting());
    REQUIRE(gone.ok());
    dead_endpoint = (*gone)->endpoint();
  }
  auto a = make_transport(backend, kvferry::test::trusting());
  REQUIRE(a.ok());
  completion_log log;
  (*a)->set_completion_handler(log.handler());
  test_buffer src(64);
  auto s = (*a)->register_region(src.data(), src.size());
  REQUIRE(s.ok());
  auto peer = (*a)->connect(dead_endpoint);
  REQUIRE(peer.ok());
  REQUIRE((*a)->post(*peer, write_batch{9, {{*s, 0, 1, 0, 8}}}).ok());
  auto done = log.wait(1);
  REQUIRE(done.size() == 1);
  CHECK(done[0].cookie == 9u);
  CHECK(done[0].result.error_code() == code::connect_failed);
}

TEST_CASE("the registry refuses an unknown backend by name", "[transport][conformance]") {
  auto t = make_transport("carrier-pigeon", kvferry::test::trusting());
  REQUIRE_FALSE(t.ok());
  CHECK_THAT(t.error().message(), Catch::Contains("'carrier-pigeon'") && Catch::Contains("tcp"));
}
