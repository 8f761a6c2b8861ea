// What only the tcp backend has: a wire that peers can abuse. A peer that
// breaks the format loses its own connection and nobody else's; a refused
// batch leaves the connection usable; a receiver that restarts is reconnected.
// And several streams per peer: how a batch is split over them, that it lands
// byte-exact and in order, and what a reset of one stream fails.
#include <catch2/catch.hpp>

#include <linux/sockios.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <numeric>
#include <random>
#include <thread>

#include "tests/support/completion_log.hpp"
#include "tests/support/trusting.hpp"
#include "transport/base/peer_auth.hpp"
#include "transport/base/posix_socket.hpp"
#include "transport/registry.hpp"
#include "transport/tcp/tcp_options.hpp"
#include "transport/tcp/tcp_stripes.hpp"
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
    auto made = make_transport("tcp", kvferry::test::trusting(o));
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
    // A trusting receiver still says so: a challenge that wants no answer.
    challenge c;
    REQUIRE(read_exact(fd->get(), &c, sizeof(c)).ok());
    REQUIRE(c.magic == challenge_magic);
    REQUIRE(c.required == 0u);
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
  auto sender = make_transport("tcp", kvferry::test::trusting());
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
  challenge c;  // a trusting receiver's: no answer wanted
  REQUIRE(read_exact(fd->get(), &c, sizeof(c)).ok());
  // Once the receiver admitted the batch it places the 100 bytes sent and
  // waits for the other 924. Waited for with the fence open all along (a
  // probe that closed and reopened it could refuse the batch that arrived
  // while it was closed: seen once under load in the flake hunt).
  std::atomic_ref<std::byte> last_sent{r.mem[99]};
  for (int i = 0; i < 2000 && last_sent.load() != std::byte{5}; ++i)  // up to 10 s under load
    std::this_thread::sleep_for(std::chrono::milliseconds{5});
  REQUIRE(last_sent.load() == std::byte{5});
  bool quiet = r.t->close_fence(9);
  REQUIRE_FALSE(quiet);  // the batch holds its fence while it is stuck
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

// -- several streams per peer ---------------------------------------------------

namespace {

/// `bytes` of random contents in shared memory, registered with `t`.
struct filled_region {
  std::vector<std::byte> mem;
  region_id id = 0;
  filled_region(transport::transport& t, size_t bytes, uint32_t seed) : mem(bytes) {
    std::mt19937_64 rng{seed};
    for (size_t i = 0; i + 8 <= bytes; i += 8) {
      auto v = rng();
      std::memcpy(mem.data() + i, &v, 8);
    }
    auto r = t.register_region(mem.data(), mem.size());
    REQUIRE(r.ok());
    id = *r;
  }
};

/// Two tcp transports with `streams` connections per peer: `a` writes into `b`.
struct striped_pair {
  std::unique_ptr<transport::transport> a, b;
  completion_log log;
  peer_id to_b = 0;

  explicit striped_pair(uint32_t streams) {
    options o;
    o.backend<tcp::tcp_options>().streams = streams;
    a = std::move(make_transport("tcp", kvferry::test::trusting(o))).value();
    b = std::move(make_transport("tcp", kvferry::test::trusting(o))).value();
    a->set_completion_handler(log.handler());
    to_b = *a->connect(b->endpoint());
  }
};

/// The sockets of this process connected to `port` from the client side: the
/// sender's streams to a receiver listening there.
std::vector<int> client_sockets_to(uint16_t port) {
  std::vector<int> out;
  for (int fd = 0; fd < 4096; ++fd) {
    sockaddr_storage peer{}, self{};
    socklen_t pl = sizeof(peer), sl = sizeof(self);
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &pl) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &sl) != 0 ||
        peer.ss_family != AF_INET)
      continue;
    if (ntohs(reinterpret_cast<sockaddr_in*>(&peer)->sin_port) == port &&
        ntohs(reinterpret_cast<sockaddr_in*>(&self)->sin_port) != port)
      out.push_back(fd);
  }
  return out;
}

/// A KV-shaped batch: `pages` pages of `page` bytes from random source pages
/// to random destination pages, plus odd-sized writes across granule borders.
write_batch shuffled_batch(uint64_t cookie, region_id src, region_id dst, uint32_t pages,
                           uint64_t page, uint32_t seed) {
  std::mt19937 rng{seed};
  std::vector<uint32_t> from(pages), to(pages);
  std::iota(from.begin(), from.end(), 0u);
  std::iota(to.begin(), to.end(), 0u);
  std::shuffle(from.begin(), from.end(), rng);
  std::shuffle(to.begin(), to.end(), rng);
  write_batch b{cookie, {}};
  for (uint32_t i = 0; i < pages; ++i)
    b.ops.push_back({src, from[i] * page, dst, to[i] * page, page});
  return b;
}

}  // namespace

TEST_CASE("tcp stripes: every byte goes once to the stream of its address in op order",
          "[transport][tcp]") {
  uint32_t streams = GENERATE(1u, 2u, 4u, 7u);
  CAPTURE(streams);
  std::mt19937_64 rng{streams};
  std::vector<write_op> ops;
  uint64_t total = 0;
  for (int i = 0; i < 200; ++i) {
    uint64_t len = rng() % (3 * tcp::stripe_granule);
    uint64_t off = rng() % (64 * tcp::stripe_granule);
    ops.push_back({1, rng() % (1 << 20), static_cast<region_id>(1 + rng() % 3), off, len});
    total += len;
  }
  ops.push_back({1, 0, 2, 5, 0});                        // zero-length: kept
  ops.push_back({1, 0, 2, UINT64_MAX - 8, 16});          // overflowing: kept whole
  ops.push_back({1, 0, 3, 0, 8 * tcp::stripe_granule});  // long and aligned: spread evenly
  total += 16 + 8 * tcp::stripe_granule;
  auto parts = tcp::split_batch(ops, streams);
  REQUIRE(parts.size() == streams);
  uint64_t seen = 0;
  for (uint32_t s = 0; s < streams; ++s)
    for (auto& op : parts[s]) {
      seen += op.length;
      if (op.remote_offset > UINT64_MAX - op.length)
        continue;
      // A piece never leaves its first granule's stream.
      for (uint64_t at = op.remote_offset; at < op.remote_offset + op.length;
           at += tcp::stripe_granule - at % tcp::stripe_granule)
        CHECK(tcp::stream_of(op.remote, at, streams) == s);
    }
  CHECK(seen == total);
  // The aligned 1 MiB write is spread over the streams evenly.
  std::vector<uint64_t> per_stream(streams);
  for (uint32_t s = 0; s < streams; ++s)
    for (auto& op : parts[s])
      if (op.remote == 3 && op.local_offset + op.length <= 8 * tcp::stripe_granule &&
          op.length % tcp::stripe_granule == 0 && op.remote_offset == op.local_offset)
        per_stream[s] += op.length;
  if (streams == 2 || streams == 4) {
    for (auto n : per_stream)
      CHECK(n == 8 * tcp::stripe_granule / streams);
  }
}

TEST_CASE("tcp stripes: adjacent runs are coalesced into one op", "[transport][tcp]") {
  std::vector<write_op> ops;
  for (uint64_t i = 0; i < 16; ++i)
    ops.push_back({1, i * 4096, 2, i * 4096, 4096});
  auto parts = tcp::split_batch(ops, 1);
  REQUIRE(parts[0].size() == 1);
  CHECK(parts[0][0] == write_op{1, 0, 2, 0, 16 * 4096});
}

TEST_CASE("tcp: a batch striped over several streams lands byte-exact", "[transport][tcp]") {
  uint32_t streams = GENERATE(1u, 2u, 4u, 7u);
  CAPTURE(streams);
  striped_pair p{streams};
  constexpr uint64_t page = 128 << 10;
  constexpr uint32_t pages = 96;
  filled_region src{*p.a, pages * page, 1};
  filled_region dst{*p.b, pages * page, 0};
  std::fill(dst.mem.begin(), dst.mem.end(), std::byte{0});
  auto batch = shuffled_batch(1, src.id, dst.id, pages, page, streams);
  // And writes that cross granule borders, of odd lengths.
  auto expected = std::vector<std::byte>(dst.mem.size());
  for (auto& op : batch.ops)
    std::memcpy(expected.data() + op.remote_offset, src.mem.data() + op.local_offset, op.length);
  for (uint64_t i = 0; i < 5; ++i) {
    write_op op{src.id, i * 7777, dst.id, page * (3 + 11 * i) - 1000 * (i + 1), 3 * page + i};
    batch.ops.push_back(op);
    std::memcpy(expected.data() + op.remote_offset, src.mem.data() + op.local_offset, op.length);
  }
  REQUIRE(p.a->post(p.to_b, batch).ok());
  auto done = p.log.wait(1, std::chrono::seconds{60});
  REQUIRE(done.size() == 1);
  CHECK(done[0].cookie == 1u);
  CHECK(done[0].result.ok());
  CHECK(std::memcmp(dst.mem.data(), expected.data(), expected.size()) == 0);
  // The batch was spread over every stream: that many connections are open.
  CHECK(client_sockets_to(parse_endpoint(p.b->endpoint())->port).size() == streams);
}

TEST_CASE("tcp: writes of the same bytes land in post order across streams", "[transport][tcp]") {
  striped_pair p{4};
  constexpr uint64_t len = 2 << 20;
  constexpr uint32_t rounds = 24;
  filled_region src{*p.a, rounds * len, 2};
  filled_region dst{*p.b, len, 0};
  // Every batch overwrites the whole destination, each from another source,
  // and inside a batch a second op rewrites part of what the first wrote.
  for (uint32_t r = 0; r < rounds; ++r) {
    write_batch b{r, {{src.id, r * len, dst.id, 0, len}, {src.id, 5, dst.id, 4096, 300000}}};
    REQUIRE(p.a->post(p.to_b, b).ok());
  }
  auto done = p.log.wait(rounds, std::chrono::seconds{60});
  REQUIRE(done.size() == rounds);
  for (uint32_t r = 0; r < rounds; ++r) {
    CHECK(done[r].cookie == r);
    CHECK(done[r].result.ok());
  }
  auto last = (rounds - 1) * len;
  CHECK(std::memcmp(dst.mem.data(), src.mem.data() + last, 4096) == 0);
  CHECK(std::memcmp(dst.mem.data() + 4096, src.mem.data() + 5, 300000) == 0);
  CHECK(std::memcmp(dst.mem.data() + 304096, src.mem.data() + last + 304096, len - 304096) == 0);
}

TEST_CASE("tcp: a stream reset mid-batch fails the batches on it and the next batch reconnects",
          "[transport][tcp]") {
  striped_pair p{4};
  constexpr uint64_t len = 64 << 20;
  filled_region src{*p.a, len, 3};
  filled_region dst{*p.b, len, 0};
  auto port = parse_endpoint(p.b->endpoint())->port;
  // Batches of granules that all travel on stream 2 of 4 ("on"), or all on
  // stream 1 ("off"): only the first kind has bytes on the stream we reset.
  auto granules_of = [&](uint32_t stream) {
    write_batch b;
    for (uint64_t at = 0; at < len; at += tcp::stripe_granule)
      if (tcp::stream_of(dst.id, at, 4) == stream)
        b.ops.push_back({src.id, at, dst.id, at, tcp::stripe_granule});
    return b;
  };
  auto on = granules_of(1), off = granules_of(0);
  REQUIRE(p.a->post(p.to_b, write_batch{0, {on.ops[0]}}).ok());
  REQUIRE(p.log.wait(1).size() == 1);
  auto sockets = client_sockets_to(port);
  REQUIRE(sockets.size() == 1);  // only that stream connected yet
  constexpr uint64_t n = 24;
  for (uint64_t i = 1; i <= n; ++i) {
    auto b = i % 2 ? on : off;
    b.cookie = i;
    REQUIRE(p.a->post(p.to_b, b).ok());
  }
  // Once a batch has bytes on the stream (its socket holds unacknowledged
  // bytes: batch 0 was acknowledged whole, so they are a later batch's), its
  // connection is reset under the sender's feet. (Timing it by completions
  // instead let the whole queue drain, or not start yet, on a loaded machine,
  // and then no batch had bytes on the stream to fail.)
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{30};
  int unsent = 0;
  while (::ioctl(sockets[0], SIOCOUTQ, &unsent) == 0 && unsent == 0 &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  REQUIRE(unsent > 0);
  ::shutdown(sockets[0], SHUT_RDWR);
  auto done = p.log.wait(n + 1, std::chrono::seconds{60});
  REQUIRE(done.size() == n + 1);
  uint64_t failed = 0;
  for (uint64_t i = 1; i <= n; ++i) {
    INFO("batch " << i << ": " << done[i].result.to_string());
    CHECK(done[i].cookie == i);
    if (i % 2 == 0) {
      CHECK(done[i].result.ok());  // nothing of it was on the lost connection
      continue;
    }
    if (done[i].result.ok())
      continue;
    ++failed;
    CHECK(done[i].result.error_code() == code::connection_lost);
    CHECK_THAT(done[i].result.message(),
               Catch::Contains("tcp peer " + p.b->endpoint() + " stream 2/4"));
  }
  CHECK(failed > 0);
  // The next batch, over every stream, reconnects the lost one and lands whole.
  std::fill(dst.mem.begin(), dst.mem.end(), std::byte{0});
  REQUIRE(p.a->post(p.to_b, write_batch{99, {{src.id, 0, dst.id, 0, len}}}).ok());
  done = p.log.wait(n + 2, std::chrono::seconds{60});
  REQUIRE(done.size() == n + 2);
  CHECK(done.back().cookie == 99u);
  CHECK(done.back().result.ok());
  CHECK(std::memcmp(dst.mem.data(), src.mem.data(), len) == 0);
}

TEST_CASE("tcp: disconnect cuts every stream of a peer and fences hold across them",
          "[transport][tcp]") {
  striped_pair p{4};
  constexpr uint64_t len = 16 << 20;
  filled_region src{*p.a, len, 4};
  filled_region dst{*p.b, len, 0};
  p.b->open_fence(3);
  REQUIRE(p.a->post(p.to_b, write_batch{0, {{src.id, 0, dst.id, 0, len}}, 3}).ok());
  REQUIRE(p.log.wait(1).size() == 1);
  CHECK(p.log.wait(1)[0].result.ok());
  auto port = parse_endpoint(p.b->endpoint())->port;
  REQUIRE(client_sockets_to(port).size() == 4);
  // A closed fence refuses every stripe of a batch: nothing of it lands.
  CHECK(p.b->close_fence(3));
  std::fill(dst.mem.begin(), dst.mem.end(), std::byte{0});
  REQUIRE(p.a->post(p.to_b, write_batch{1, {{src.id, 0, dst.id, 0, len}}, 3}).ok());
  auto done = p.log.wait(2);
  REQUIRE(done.size() == 2);
  CHECK(done[1].result.error_code() == code::fenced);
  CHECK(std::all_of(dst.mem.begin(), dst.mem.end(), [](std::byte c) { return c == std::byte{0}; }));
  // disconnect() closes all four; each stream reconnects on its next stripe.
  p.b->disconnect(p.a->endpoint());
  for (int i = 0; i < 400; ++i) {
    if (client_sockets_to(port).empty())
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds{5});
  }
  REQUIRE(p.a->post(p.to_b, write_batch{2, {{src.id, 0, dst.id, 0, len}}}).ok());
  done = p.log.wait(3);
  REQUIRE(done.size() == 3);
  CHECK(done[2].result.ok());
  CHECK(std::memcmp(dst.mem.data(), src.mem.data(), len) == 0);
}
