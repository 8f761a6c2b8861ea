// Nobody writes without a grant: a data connection proves the credential the
// receiving rank handed out for its sender's endpoint (challenge and
// response), and a batch lands only inside the items its fence grants to
// that sender. Refusals name the op and the fence, never a region's size.
// On the real wire backends (tcp, shm, auto), and by hand-written strangers
// on the tcp wire: a wrong answer, a silent connection, headers that
// announce millions of ops.
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <sys/time.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/completion_log.hpp"
#include "tests/support/process_probe.hpp"
#include "tests/support/trusting.hpp"
#include "transport/base/peer_auth.hpp"
#include "transport/base/posix_socket.hpp"
#include "transport/registry.hpp"
#include "transport/shared_memory.hpp"
#include "transport/tcp/tcp_wire.hpp"

using namespace kvferry;
using namespace kvferry::transport;
using kvferry::test::completion_log;
using kvferry::test::rss_kib;

namespace {

constexpr uint64_t page = 4096;
constexpr uint64_t pages = 4;

/// A sender `a` and a receiver `b` of one backend, neither trusting.
struct guarded_pair {
  std::unique_ptr<transport::transport> a, b;
  shared_memory src = std::move(shared_memory::allocate(page * pages)).value();
  shared_memory dst = std::move(shared_memory::allocate(page * pages)).value();
  region_id src_id = 0, dst_id = 0;
  completion_log log;

  explicit guarded_pair(const std::string& backend) {
    a = std::move(make_transport(backend, {})).value();
    b = std::move(make_transport(backend, {})).value();
    for (size_t i = 0; i < src.size(); ++i)
      src.data()[i] = std::byte(i % 251 + 1);
    src_id = *a->register_region(src.data(), src.size());
    dst_id = *b->register_region(dst.data(), dst.size());
    a->set_completion_handler(log.handler());
  }

  /// Pages `items` of the destination region, for `sender`.
  grant pages_for(const std::string& sender, std::vector<uint32_t> items) const {
    return grant{{sender},
                 {{dst_id, 0, page * pages, page,
                   std::make_shared<const std::vector<uint32_t>>(std::move(items))}}};
  }

  /// Posts one write of `len` bytes to destination offset `off` with
  /// `fence` and waits for its completion.
  status write(peer_id to, uint64_t cookie, uint64_t off, uint64_t len, uint64_t fence) {
    REQUIRE(a->post(to, write_batch{cookie, {{src_id, off, dst_id, off, len}}, fence}).ok());
    auto done = log.wait(log.wait(0).size() + 1);
    REQUIRE(!done.empty());
    for (auto& c : done)
      if (c.cookie == cookie)
        return c.result;
    FAIL("no completion for cookie " << cookie);
    return {};
  }

  bool untouched(uint64_t off, uint64_t len) const {
    for (uint64_t i = off; i < off + len; ++i)
      if (dst.data()[i] != std::byte{0})
        return false;
    return true;
  }

  bool landed(uint64_t off, uint64_t len) const {
    return std::memcmp(src.data() + off, dst.data() + off, len) == 0;
  }
};

}  // namespace

TEST_CASE("admission: a sender without the receiver's credential is refused and writes nothing",
          "[transport][admission]") {
  for (std::string backend : {"tcp", "shm", "auto"}) {
    CAPTURE(backend);
    guarded_pair p{backend};
    p.b->open_fence(7, p.pages_for(p.a->endpoint(), {0, 1, 2, 3}));

    auto none = *p.a->connect(p.b->endpoint());
    auto st = p.write(none, 1, 0, page, 7);
    CAPTURE(st.to_string());
    CHECK(st.error_code() == code::connect_failed);
    CHECK(st.message().find("requires a credential") != std::string::npos);

    // A credential made for another sender's endpoint does not verify.
    auto forged = *p.a->connect(p.b->endpoint(), p.b->credential_for("tcp://127.0.0.1:1"));
    st = p.write(forged, 2, 0, page, 7);
    CAPTURE(st.to_string());
    CHECK(st.error_code() == code::connect_failed);
    CHECK(st.message().find("credential") != std::string::npos);
    CHECK(p.untouched(0, page * pages));
  }
}

TEST_CASE("admission: a batch lands only inside the pages granted to its sender for an open room",
          "[transport][admission]") {
  for (std::string backend : {"tcp", "shm", "auto"}) {
    CAPTURE(backend);
    guarded_pair p{backend};
    auto to = *p.a->connect(p.b->endpoint(), p.b->credential_for(p.a->endpoint()));
    p.b->open_fence(7, p.pages_for(p.a->endpoint(), {1, 3}));

    CHECK(p.write(to, 1, page, page, 7).ok());  // page 1: granted
    CHECK(p.landed(page, page));
    CHECK(p.write(to, 2, 3 * page + 100, 200, 7).ok());  // inside page 3
    CHECK(p.landed(3 * page + 100, 200));

    auto refused = [&](uint64_t cookie, uint64_t off, uint64_t len, uint64_t fence) {
      auto st = p.write(to, cookie, off, len, fence);
      CAPTURE(st.to_string());
      CHECK(st.error_code() == code::not_granted);
      // Nothing about the region's size reaches the sender.
      CHECK(st.message().find(std::to_string(page * pages)) == std::string::npos);
      return st;
    };
    CHECK_FALSE(refused(3, 2 * page, page, 7).ok());  // page 2: not granted
    CHECK_FALSE(refused(4, page, 2 * page, 7).ok());  // pages 1 and 2
    CHECK_FALSE(refused(5, 0, 16, 7).ok());           // page 0
    auto zero = refused(6, page, 16, 0);              // fence 0
    CHECK(zero.message().find("fence 0 admits nothing") != std::string::npos);
    CHECK(p.untouched(0, page));
    CHECK(p.untouched(2 * page, page));

    // A grant for another sender admits nothing from this one.
    p.b->open_fence(8, p.pages_for("tcp://127.0.0.1:1", {0, 1, 2, 3}));
    CHECK_FALSE(refused(7, 0, page, 8).ok());
    CHECK(p.untouched(0, page));

    // A closed fence: fenced, as before.
    CHECK(p.b->close_fence(7));
    auto closed = p.write(to, 8, page, page, 7);
    CHECK(closed.error_code() == code::fenced);
  }
}

TEST_CASE("admission: a stranger on the tcp data port learns nothing and the port still serves",
          "[transport][admission]") {
  guarded_pair p{"tcp"};
  auto where = *parse_endpoint(p.b->endpoint());
  auto rss_before = rss_kib();

  SECTION("a wrong answer to the challenge: refused, closed") {
    auto fd = std::move(connect_to(where, 2000)).value();
    std::string name = "tcp://stranger:1";
    tcp::hello h;
    h.name_len = static_cast<uint32_t>(name.size());
    std::vector<iovec> iov{{&h, sizeof(h)}, {name.data(), name.size()}};
    REQUIRE(write_all(fd.get(), iov).ok());
    challenge c;
    REQUIRE(read_exact(fd.get(), &c, sizeof(c)).ok());
    CHECK(c.required == 1u);
    std::array<uint8_t, 32> guess{};
    std::vector<iovec> answer{{guess.data(), guess.size()}};
    REQUIRE(write_all(fd.get(), answer).ok());
    auth_result r;
    REQUIRE(read_exact(fd.get(), &r, sizeof(r)).ok());
    CHECK(r.accepted == 0u);
    char byte;
    CHECK(::recv(fd.get(), &byte, 1, 0) == 0);  // closed
  }

  SECTION("20 strangers that say nothing hold no thread past the handshake timeout") {
    std::vector<socket_fd> silent;
    for (int i = 0; i < 20; ++i)
      silent.push_back(std::move(connect_to(where, 2000)).value());
    std::this_thread::sleep_for(std::chrono::milliseconds{auth_timeout_ms + 500});
    for (auto& fd : silent) {
      char byte;
      timeval tv{2, 0};
      ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      CHECK(::recv(fd.get(), &byte, 1, 0) == 0);  // closed by the receiver
    }
  }

  // The listener still admits the sender that holds the credential.
  auto to = *p.a->connect(p.b->endpoint(), p.b->credential_for(p.a->endpoint()));
  p.b->open_fence(7, p.pages_for(p.a->endpoint(), {0}));
  CHECK(p.write(to, 1, 0, page, 7).ok());
  CHECK(p.landed(0, page));
  std::printf("admission: receiver RSS %llu KiB before the strangers, %llu KiB after\n",
              static_cast<unsigned long long>(rss_before),
              static_cast<unsigned long long>(rss_kib()));
}

TEST_CASE("admission: headers announcing millions of ops cost memory only as bytes arrive",
          "[transport][admission]") {
  // A trusting receiver lets the strangers reach the batch header: the
  // bound under test is the reading of ops, not the handshake.
  auto b = std::move(make_transport("tcp", kvferry::test::trusting())).value();
  std::vector<std::byte> mem(page);
  REQUIRE(b->register_region(mem.data(), mem.size()).ok());
  auto where = *parse_endpoint(b->endpoint());
  auto before = rss_kib();
  std::vector<socket_fd> stalled;
  for (int i = 0; i < 20; ++i) {
    auto fd = std::move(connect_to(where, 2000)).value();
    tcp::hello h;
    tcp::batch_header bh;
    bh.n_ops = tcp::max_ops_per_batch;  // 2^22 ops: 96 MiB of headers announced
    bh.payload_bytes = 1;
    std::vector<iovec> iov{{&h, sizeof(h)}, {&bh, sizeof(bh)}};
    REQUIRE(write_all(fd.get(), iov).ok());
    stalled.push_back(std::move(fd));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds{300});
  auto after = rss_kib();
  std::printf("admission: 20 connections announcing 2^22 ops each: RSS %llu KiB -> %llu KiB\n",
              static_cast<unsigned long long>(before), static_cast<unsigned long long>(after));
  // 20 x 96 MiB were zero-filled before; now at most one 64 KiB piece each.
  CHECK(after < before + 32 * 1024);
}
