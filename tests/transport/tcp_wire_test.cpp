// What only the tcp backend has: a wire that peers can abuse. A peer that
// breaks the format loses its own connection and nobody else's; a refused
// batch leaves the connection usable; a receiver that restarts is reconnected.
#include <catch2/catch.hpp>

#include <sys/socket.h>

#include <cstring>
#include <thread>

#include "tests/support/completion_log.hpp"
#include "transport/posix_socket.hpp"
#include "transport/registry.hpp"
#include "transport/tcp/tcp_wire.hpp"

using namespace kvferry;
using namespace kvferry::transport;
using kvferry::test::completion_log;

namespace {

struct receiver_side {
  std::unique_ptr<transport::transport> t;
  std::vector<std::byte> mem = std::vector<std::byte>(4096);
  region_id region = 0;

  explicit receiver_side(uint16_t port = 0) {
    options o;
    o.listen_port = port;
    auto made = make_transport("tcp", o);
    REQUIRE(made.ok());
    t = std::move(made).value();
    region = *t->register_region(mem.data(), mem.size());
  }

  host_port where() const { return *parse_endpoint(t->endpoint()); }
};

/// A hand-written client speaking the wire format directly.
socket_fd raw_client(const receiver_side& r, bool send_hello = true) {
  auto fd = connect_to(r.where(), 2000);
  REQUIRE(fd.ok());
  if (send_hello) {
    tcp::hello h;
    std::vector<iovec> iov{{&h, sizeof(h)}};
    REQUIRE(write_all(fd->get(), iov).ok());
  }
  return std::move(fd).value();
}

tcp::ack_header send_batch(int fd, uint64_t cookie, uint32_t region, uint64_t offset,
                           std::vector<std::byte> payload) {
  tcp::batch_header bh;
  bh.n_ops = 1;
  bh.cookie = cookie;
  bh.payload_bytes = payload.size();
  tcp::op_header op{region, 0, offset, payload.size()};
  std::vector<iovec> iov{{&bh, sizeof(bh)}, {&op, sizeof(op)}, {payload.data(), payload.size()}};
  REQUIRE(write_all(fd, iov).ok());
  tcp::ack_header ack;
  REQUIRE(read_exact(fd, &ack, sizeof(ack)).ok());
  std::string msg(ack.message_len, '\0');
  REQUIRE(read_exact(fd, msg.data(), msg.size()).ok());
  return ack;
}

bool closed_by_peer(int fd) {
  char c;
  timeval tv{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return ::recv(fd, &c, 1, 0) == 0;
}

}  // namespace

TEST_CASE("tcp: an out-of-bounds op is answered with the error and the connection stays",
          "[transport][tcp]") {
  receiver_side r;
  auto fd = raw_client(r);
  auto ack = send_batch(fd.get(), 1, r.region, 4090, std::vector<std::byte>(16, std::byte{1}));
  CHECK(ack.cookie == 1u);
  CHECK(ack.code == static_cast<uint8_t>(code::out_of_bounds));
  CHECK(r.mem[4090] == std::byte{0});
  ack = send_batch(fd.get(), 2, r.region, 100, std::vector<std::byte>(16, std::byte{9}));
  CHECK(ack.code == static_cast<uint8_t>(code::ok));
  CHECK(r.mem[100] == std::byte{9});
  CHECK(r.mem[115] == std::byte{9});
}

TEST_CASE("tcp: a peer that breaks the wire format loses its connection only", "[transport][tcp]") {
  receiver_side r;
  auto good = raw_client(r);
  SECTION("bad hello") {
    auto bad = raw_client(r, false);
    uint64_t junk[2] = {0x0123456789abcdefull, 0x0123456789abcdefull};
    std::vector<iovec> iov{{junk, sizeof(junk)}};
    REQUIRE(write_all(bad.get(), iov).ok());
    CHECK(closed_by_peer(bad.get()));
  }
  SECTION("bad batch magic") {
    auto bad = raw_client(r);
    tcp::batch_header bh;
    bh.magic = 0xdeadbeef;
    std::vector<iovec> iov{{&bh, sizeof(bh)}};
    REQUIRE(write_all(bad.get(), iov).ok());
    CHECK(closed_by_peer(bad.get()));
  }
  SECTION("too many ops") {
    auto bad = raw_client(r);
    tcp::batch_header bh;
    bh.n_ops = tcp::max_ops_per_batch + 1;
    std::vector<iovec> iov{{&bh, sizeof(bh)}};
    REQUIRE(write_all(bad.get(), iov).ok());
    CHECK(closed_by_peer(bad.get()));
  }
  SECTION("payload size that does not add up") {
    auto bad = raw_client(r);
    tcp::batch_header bh;
    bh.n_ops = 1;
    bh.payload_bytes = 5;
    tcp::op_header op{r.region, 0, 0, 4};
    std::vector<iovec> iov{{&bh, sizeof(bh)}, {&op, sizeof(op)}};
    REQUIRE(write_all(bad.get(), iov).ok());
    CHECK(closed_by_peer(bad.get()));
  }
  auto ack = send_batch(good.get(), 5, r.region, 0, std::vector<std::byte>(8, std::byte{3}));
  CHECK(ack.code == static_cast<uint8_t>(code::ok));
  CHECK(r.mem[7] == std::byte{3});
}

TEST_CASE("tcp: a receiver that goes away fails the batches in flight and a new one is reconnected",
          "[transport][tcp]") {
  auto r = std::make_unique<receiver_side>();
  auto port = r->where().port;
  auto sender = make_transport("tcp", {});
  REQUIRE(sender.ok());
  completion_log log;
  (*sender)->set_completion_handler(log.handler());
  std::vector<std::byte> src(4096, std::byte{7});
  auto s = *(*sender)->register_region(src.data(), src.size());
  auto peer = *(*sender)->connect(r->t->endpoint());
  REQUIRE((*sender)->post(peer, write_batch{1, {{s, 0, r->region, 0, 64}}}).ok());
  REQUIRE(log.wait(1).size() == 1);
  auto region = r->region;
  r.reset();  // the receiver's process "dies": its connections close
  REQUIRE((*sender)->post(peer, write_batch{2, {{s, 0, region, 0, 64}}}).ok());
  auto done = log.wait(2);
  REQUIRE(done.size() == 2);
  CHECK_FALSE(done[1].result.ok());
  // A new receiver on the same port: the next batch connects again.
  r = std::make_unique<receiver_side>(port);
  REQUIRE((*sender)->post(peer, write_batch{3, {{s, 0, r->region, 0, 64}}}).ok());
  done = log.wait(3);
  REQUIRE(done.size() == 3);
  CHECK(done[2].cookie == 3u);
  CHECK(done[2].result.ok());
  CHECK(r->mem[63] == std::byte{7});
}

TEST_CASE("tcp: a sender stuck in the middle of a batch holds its fence until it is cut off",
          "[transport][tcp]") {
  receiver_side r;
  r.t->open_fence(9);
  auto fd = connect_to(r.where(), 2000);
  REQUIRE(fd.ok());
  std::string name = "tcp://stuck:1";
  tcp::hello h;
  h.name_len = static_cast<uint32_t>(name.size());
  tcp::batch_header bh;
  bh.n_ops = 1;
  bh.cookie = 1;
  bh.payload_bytes = 1024;
  bh.fence = 9;
  tcp::op_header op{r.region, 0, 0, 1024};
  std::vector<std::byte> part(100, std::byte{5});
  std::vector<iovec> iov{{&h, sizeof(h)},
                         {name.data(), name.size()},
                         {&bh, sizeof(bh)},
                         {&op, sizeof(op)},
                         {part.data(), part.size()}};
  REQUIRE(write_all(fd->get(), iov).ok());
  // The receiver is now inside the batch, waiting for the other 924 bytes.
  bool quiet = true;
  for (int i = 0; i < 200 && quiet; ++i) {
    quiet = r.t->close_fence(9);
    if (quiet) {
      r.t->open_fence(9);  // the batch had not started yet: try again
      std::this_thread::sleep_for(std::chrono::milliseconds{5});
    }
  }
  REQUIRE_FALSE(quiet);
  r.t->disconnect(name);
  for (int i = 0; i < 400 && !quiet; ++i) {
    quiet = r.t->close_fence(9);
    std::this_thread::sleep_for(std::chrono::milliseconds{5});
  }
  CHECK(quiet);
  CHECK(closed_by_peer(fd->get()));
}

TEST_CASE("tcp: endpoints are parsed strictly", "[transport][tcp]") {
  CHECK(parse_endpoint("tcp://127.0.0.1:80").ok());
  CHECK(parse_endpoint("tcp://[::1]:80")->host == "::1");
  for (auto bad :
       {"tcp://127.0.0.1", "tcp://:80", "tcp://h:0", "tcp://h:70000", "udp://h:1", "tcp://h:8a"})
    CHECK(parse_endpoint(bad).error().error_code() == code::invalid_argument);
}
