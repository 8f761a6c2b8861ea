// Faults of the cross-process backends (tcp, shm), with real processes: a peer
// killed mid-write, a region deregistered, a write out of bounds, a connection
// reset. Each fails exactly the batches it carried, with a cause that names the
// backend and the peer, and the next batch reconnects.
#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <regex>
#include <thread>

#include "apps/common/child_process.hpp"
#include "tests/support/completion_log.hpp"
#include "tests/support/trusting.hpp"
#include "transport/registry.hpp"
#include "transport/shared_memory.hpp"

using namespace kvferry;
using namespace kvferry::transport;
using kvferry::test::completion_log;
using namespace std::chrono_literals;

namespace {

constexpr uint64_t big = 32ull << 20;  // one write long enough to be killed in

/// A transport of `backend` with one registered shared region of `bytes`.
struct node {
  std::unique_ptr<transport::transport> net;
  shared_memory mem;
  region_id region = 0;
  completion_log log;

  node(const std::string& backend, uint64_t bytes)
      : mem(std::move(shared_memory::allocate(bytes)).value()) {
    auto made = make_transport(backend, kvferry::test::trusting());
    REQUIRE(made.ok());
    net = std::move(made).value();
    auto r = net->register_region(mem.data(), mem.size());
    REQUIRE(r.ok());
    region = *r;
    net->set_completion_handler(log.handler());
  }
};

/// "shm peer shm://..." / "tcp peer tcp://...": the backend and the peer.
std::string cause_prefix(const std::string& backend, const std::string& endpoint) {
  return backend + " peer " + endpoint;
}

std::smatch expect_line(apps::child_process& child, const std::string& prefix,
                        const std::regex& shape) {
  auto line = child.wait_for_line([&](auto& l) { return l.rfind(prefix, 0) == 0; }, 30s);
  INFO(child.output());
  REQUIRE(line.has_value());
  std::smatch m;
  static std::string kept;
  kept = *line;
  REQUIRE(std::regex_search(kept, m, shape));
  return m;
}

}  // namespace

TEST_CASE("faults: a receiver killed mid-write fails the batches in flight by backend and peer",
          "[transport][faults]") {
  std::string backend = GENERATE("tcp", "shm");
  CAPTURE(backend);
  apps::child_process receiver{{KVFERRY_TEST_PEER, "receiver", backend, std::to_string(big)}};
  auto m = expect_line(receiver, "ready ", std::regex{R"(ready (\S+) (\d+))"});
  std::string endpoint = m[1];
  auto remote = static_cast<region_id>(std::stoul(m[2]));

  node a{backend, big};
  auto peer = a.net->connect(endpoint);
  REQUIRE(peer.ok());
  REQUIRE(a.net->post(*peer, write_batch{0, {{a.region, 0, remote, 0, big}}}).ok());
  REQUIRE(a.log.wait(1).size() == 1);
  REQUIRE(a.log.wait(1)[0].result.ok());
  constexpr uint64_t n = 8;
  for (uint64_t i = 1; i <= n; ++i)
    REQUIRE(a.net->post(*peer, write_batch{i, {{a.region, 0, remote, 0, big}}}).ok());
  ::kill(receiver.pid(), SIGKILL);
  receiver.wait(10s);
  auto done = a.log.wait(n + 1, 30s);
  REQUIRE(done.size() == n + 1);  // every batch completes, exactly once
  uint64_t failed = 0;
  for (uint64_t i = 1; i <= n; ++i) {
    CHECK(done[i].cookie == i);
    if (done[i].result.ok())
      continue;
    ++failed;
    CHECK(is_link_error(done[i].result.error_code()));
    CHECK_THAT(done[i].result.message(), Catch::Contains(cause_prefix(backend, endpoint)));
  }
  CHECK(failed > 0);
  // The peer is gone for good: the next batch tries to reconnect and says so.
  REQUIRE(a.net->post(*peer, write_batch{99, {{a.region, 0, remote, 0, 8}}}).ok());
  auto after = a.log.wait(n + 2, 30s);
  REQUIRE(after.size() == n + 2);
  CHECK(after.back().result.error_code() == code::connect_failed);
  CHECK_THAT(after.back().result.message(), Catch::Contains(cause_prefix(backend, endpoint)));
}

TEST_CASE("faults: a sender killed mid-write leaves no fence busy at the receiver",
          "[transport][faults]") {
  std::string backend = GENERATE("tcp", "shm");
  CAPTURE(backend);
  node b{backend, big};
  b.net->open_fence(5);
  apps::child_process sender{{KVFERRY_TEST_PEER, "sender", backend, b.net->endpoint(),
                              std::to_string(b.region), std::to_string(big), "5"}};
  expect_line(sender, "writing ", std::regex{"writing"});
  ::kill(sender.pid(), SIGKILL);
  sender.wait(10s);
  // Closing stops admission at once; it reports idle once the dead sender's
  // connection is reaped (bounded wait, no timing threshold on the figure).
  auto deadline = std::chrono::steady_clock::now() + 30s;
  bool idle = false;
  while (!(idle = b.net->close_fence(5)) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  CHECK(idle);
  // And the rank carries on: another sender writes with a new fence.
  node a{backend, 4096};
  b.net->open_fence(6);
  auto peer = a.net->connect(b.net->endpoint());
  REQUIRE(peer.ok());
  REQUIRE(a.net->post(*peer, write_batch{1, {{a.region, 0, b.region, 0, 4096}}, 6}).ok());
  auto done = a.log.wait(1);
  REQUIRE(done.size() == 1);
  CHECK(done[0].result.ok());
  // Deregistration does not wait on the dead sender either.
  CHECK(b.net->deregister_region(b.region).ok());
}

TEST_CASE("faults: refusals name the backend and the peer and the connection carries on",
          "[transport][faults]") {
  std::string backend = GENERATE("tcp", "shm");
  CAPTURE(backend);
  node a{backend, 1 << 16}, b{backend, 1 << 16};
  auto peer = a.net->connect(b.net->endpoint());
  REQUIRE(peer.ok());
  auto prefix = cause_prefix(backend, b.net->endpoint());
  REQUIRE(a.net->post(*peer, write_batch{1, {{a.region, 0, b.region, (1 << 16) - 8, 16}}}).ok());
  REQUIRE(b.net->deregister_region(b.region).ok());
  REQUIRE(a.net->post(*peer, write_batch{2, {{a.region, 0, b.region, 0, 16}}}).ok());
  auto done = a.log.wait(2);
  REQUIRE(done.size() == 2);
  // The first may have been checked before or after the deregistration.
  CHECK((done[0].result.error_code() == code::out_of_bounds ||
         done[0].result.error_code() == code::unknown_region));
  CHECK_THAT(done[0].result.message(), Catch::Contains(prefix));
  CHECK(done[1].result.error_code() == code::unknown_region);
  CHECK_THAT(done[1].result.message(), Catch::Contains(prefix));
}

TEST_CASE("faults: a connection reset fails only the batches on it and the next batch reconnects",
          "[transport][faults]") {
  std::string backend = GENERATE("tcp", "shm");
  CAPTURE(backend);
  node a{backend, big}, b{backend, big};
  auto peer = a.net->connect(b.net->endpoint());
  REQUIRE(peer.ok());
  REQUIRE(a.net->post(*peer, write_batch{0, {{a.region, 0, b.region, 0, 4096}}}).ok());
  REQUIRE(a.log.wait(1).size() == 1);

  SECTION("while idle") {
    b.net->disconnect(a.net->endpoint());
    std::this_thread::sleep_for(20ms);  // let the reset reach the sender (not required)
    REQUIRE(a.net->post(*peer, write_batch{1, {{a.region, 0, b.region, 0, 4096}}}).ok());
    auto done = a.log.wait(2);
    REQUIRE(done.size() == 2);
    CHECK(done[1].result.ok());
  }

  SECTION("mid-stream") {
    constexpr uint64_t n = 12;
    for (uint64_t i = 1; i <= n; ++i)
      REQUIRE(a.net->post(*peer, write_batch{i, {{a.region, 0, b.region, 0, big}}}).ok());
    b.net->disconnect(a.net->endpoint());
    auto done = a.log.wait(n + 1, 60s);
    REQUIRE(done.size() == n + 1);
    for (uint64_t i = 1; i <= n; ++i) {
      CHECK(done[i].cookie == i);
      if (!done[i].result.ok()) {
        CHECK(done[i].result.error_code() == code::connection_lost);
        CHECK_THAT(done[i].result.message(),
                   Catch::Contains(cause_prefix(backend, b.net->endpoint())));
      }
    }
    REQUIRE(a.net->post(*peer, write_batch{99, {{a.region, 0, b.region, 0, 4096}}}).ok());
    auto after = a.log.wait(n + 2);
    REQUIRE(after.size() == n + 2);
    CHECK(after.back().result.ok());
  }
}
