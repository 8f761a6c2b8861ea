// The guard on CAF ports (actors/process/caf_port_guard.hpp): the BASP frame
// reader by direct calls, then a real actor system that publishes an actor on
// loopback and strangers that connect to its port with raw sockets: a header
// declaring up to 4 GiB, a partial header held open, a drip, more connections
// than the cap. Each is closed, the process's memory does not move, and the
// port still serves a real CAF peer afterwards.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <openssl/ssl.h>

#include <cstdlib>
#include <filesystem>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>

#include "actors/gateway/tls.hpp"
#include "actors/process/basp_frames.hpp"
#include "actors/process/caf_port_guard.hpp"
#include "actors/process/config.hpp"
#include "tests/support/loopback_dial.hpp"

using namespace kvferry;
using namespace std::chrono_literals;

namespace {

/// A BASP header: operation `op`, payload length `len`, the rest zero.
std::vector<unsigned char> header(uint8_t op, uint32_t len) {
  std::vector<unsigned char> h(basp_header_size, 0);
  h[0] = op;
  h[4] = static_cast<unsigned char>(len >> 24);
  h[5] = static_cast<unsigned char>(len >> 16);
  h[6] = static_cast<unsigned char>(len >> 8);
  h[7] = static_cast<unsigned char>(len);
  return h;
}

TEST_CASE("basp_frame_watch reads frames whole, across any split", "[logic][guard]") {
  basp_frame_watch w{1024};
  auto h = header(1, 100);  // a client_handshake with 100 bytes of payload
  std::vector<unsigned char> stream = h;
  stream.resize(stream.size() + 100, 0xAB);
  auto hb = header(6, 0);  // then a heartbeat
  stream.insert(stream.end(), hb.begin(), hb.end());
  // One byte at a time: complete only once the last payload byte came.
  for (size_t i = 0; i < basp_header_size + 99; ++i)
    REQUIRE(w.feed(&stream[i], 1) == basp_frame_watch::fault::none);
  CHECK_FALSE(w.handshake_done());
  REQUIRE(w.feed(&stream[basp_header_size + 99], 1) == basp_frame_watch::fault::none);
  CHECK(w.handshake_done());
  CHECK(w.frames() == 1);
  REQUIRE(w.feed(&stream[basp_header_size + 100], basp_header_size) ==
          basp_frame_watch::fault::none);
  CHECK(w.frames() == 2);
  CHECK(w.describe().empty());
}

TEST_CASE("basp_frame_watch refuses a declared payload above its cap, naming it",
          "[logic][guard]") {
  for (uint8_t op = 0; op <= 6; ++op) {
    basp_frame_watch w{1024};
    auto ok = header(op, 1024);  // at the cap: fine
    REQUIRE(w.feed(ok.data(), ok.size()) == basp_frame_watch::fault::none);
    std::vector<unsigned char> payload(1024);
    REQUIRE(w.feed(payload.data(), payload.size()) == basp_frame_watch::fault::none);
    auto big = header(op, 0xFFFFFFFFu);
    CHECK(w.feed(big.data(), big.size()) == basp_frame_watch::fault::oversized);
    CHECK(w.describe() == "a BASP header declared a payload of 4294967295 bytes (operation " +
                              basp_operation_name(op) + "), expected at most 1024");
    // Sticky: nothing after a fault is read.
    CHECK(w.feed(ok.data(), ok.size()) == basp_frame_watch::fault::oversized);
  }
}

TEST_CASE("basp_frame_watch refuses an operation BASP does not have", "[logic][guard]") {
  basp_frame_watch w;
  auto h = header(7, 0);
  CHECK(w.feed(h.data(), h.size()) == basp_frame_watch::fault::unknown_operation);
  CHECK(w.describe() == "a BASP header named operation 7, expected an operation of 0 to 6");
  CHECK_FALSE(w.handshake_done());
}

// -- against a real port ----------------------------------------------------------

long rss_kib() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0)
      return std::stol(line.substr(6));
  return -1;
}

int connect_to(uint16_t port) {
  return test::dial_loopback(port);
}

void send_all(int fd, const void* data, size_t n) {
  (void)::send(fd, data, n, MSG_NOSIGNAL);
}

/// True when the other end closed `fd` within `limit` (what it sent before,
/// its server handshake, is read and dropped).
bool closed_within(int fd, std::chrono::milliseconds limit) {
  auto until = std::chrono::steady_clock::now() + limit;
  char buf[4096];
  while (std::chrono::steady_clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0)
      continue;
    auto got = ::recv(fd, buf, sizeof buf, 0);
    if (got <= 0)
      return true;
  }
  return false;
}

/// An actor system with an actor published on loopback, its port guarded.
struct served_port {
  config cfg;
  caf::actor_system sys{cfg};
  caf::actor echo = sys.spawn([]() -> caf::behavior { return {[](int x) { return x + 1; }}; });
  uint16_t port = 0;

  served_port() {
    auto p = publish_actor(sys, echo, 0, "127.0.0.1");
    REQUIRE(p);
    port = *p;
  }
  ~served_port() { caf::anon_send_exit(echo, caf::exit_reason::user_shutdown); }

  /// A real CAF peer (another actor system) reaches the actor and is answered.
  bool serves() {
    config other_cfg;
    caf::actor_system other{other_cfg};
    auto remote = other.middleman().remote_actor("127.0.0.1", port);
    if (!remote)
      return false;
    caf::scoped_actor self{other};
    bool answered = false;
    self->request(*remote, 5s, 41).receive([&](int y) { answered = y == 42; }, [](caf::error&) {});
    return answered;
  }
};

/// Sets the guard's limits for one test case, and puts them back.
struct limits_for_test {
  caf_port_limits before = caf_port_limits_now();
  explicit limits_for_test(caf_port_limits l) { set_caf_port_limits(l); }
  ~limits_for_test() { set_caf_port_limits(before); }
};

TEST_CASE(
    "a CAF port closes a connection whose BASP header declares 1-4 GiB, before CAF "
    "allocates it",
    "[process][guard]") {
  INFO(caf_port_guard_gaps());
  REQUIRE(caf_port_guard_gaps().empty());
  served_port s;
  REQUIRE(s.serves());
  auto before = rss_kib();
  auto refused = caf_port_refusals_now().oversized;
  std::vector<unsigned char> tail(1024, 0x5A);
  int n = 0;
  for (uint8_t op : {0, 1, 2, 6})
    for (uint32_t size : {default_max_basp_payload + 1, 1u << 30, 0xFFFFFFFFu}) {
      int fd = connect_to(s.port);
      REQUIRE(fd >= 0);
      auto h = header(op, size);
      send_all(fd, h.data(), h.size());
      send_all(fd, tail.data(), tail.size());
      INFO("operation " << basp_operation_name(op) << ", " << size << " bytes declared");
      CHECK(closed_within(fd, 3000ms));
      ::close(fd);
      ++n;
    }
  auto after = rss_kib();
  INFO("RSS " << before << " KiB before, " << after << " KiB after " << n << " headers");
  CHECK(after - before < 64 * 1024);
  CHECK(caf_port_refusals_now().oversized - refused == static_cast<uint64_t>(n));
  CHECK(s.serves());  // the port still serves a real peer
}

TEST_CASE("a CAF port closes a connection that does not finish its handshake in time",
          "[process][guard]") {
  auto l = caf_port_limits_now();
  l.handshake = 600ms;
  limits_for_test scoped{l};
  served_port s;
  auto late = caf_port_refusals_now().handshake_late;
  // A partial header, held open.
  int partial = connect_to(s.port);
  REQUIRE(partial >= 0);
  auto h = header(1, 8);
  send_all(partial, h.data(), 10);
  // A drip: a byte every 100 ms.
  int drip = connect_to(s.port);
  REQUIRE(drip >= 0);
  // Nothing at all.
  int mute = connect_to(s.port);
  REQUIRE(mute >= 0);
  bool drip_closed = false;
  for (int i = 0; i < 30 && !drip_closed; ++i) {
    send_all(drip, &h[static_cast<size_t>(i) % h.size()], 1);
    drip_closed = closed_within(drip, 100ms);
  }
  CHECK(drip_closed);
  CHECK(closed_within(partial, 2000ms));
  CHECK(closed_within(mute, 2000ms));
  CHECK(caf_port_refusals_now().handshake_late - late >= 3);
  for (int fd : {partial, drip, mute})
    ::close(fd);
  CHECK(s.serves());  // a real peer completes its handshake well within it
}

/// With `l` (a cap of 16), 40 connections at once: the 24 beyond the cap are
/// refused at once and counted in `counter`; the port serves after.
void refuses_beyond_cap(caf_port_limits l, uint64_t caf_port_refusals::*counter) {
  limits_for_test scoped{l};
  served_port s;
  auto over = caf_port_refusals_now().*counter;
  std::vector<int> fds;
  for (int i = 0; i < 40; ++i)
    if (int fd = connect_to(s.port); fd >= 0)
      fds.push_back(fd);
  REQUIRE(fds.size() == 40);
  int closed = 0;
  for (int fd : fds)
    closed += closed_within(fd, 300ms) ? 1 : 0;
  CHECK(closed >= 24);  // all beyond the 16 held ones
  CHECK(caf_port_refusals_now().*counter - over >= 24);
  for (int fd : fds)
    ::close(fd);
  // The held ones are closed by the client now; their places come free.
  for (int i = 0; i < 50 && caf_port_connections_now() > 0; ++i)
    std::this_thread::sleep_for(20ms);
  CHECK(s.serves());
}

TEST_CASE("a CAF port refuses connections beyond the cap per source at once, and serves after",
          "[process][guard]") {
  auto l = caf_port_limits_now();
  l.per_source = 16;
  refuses_beyond_cap(l, &caf_port_refusals::over_source_cap);
}

TEST_CASE("a CAF port refuses connections beyond the cap in all at once, and serves after",
          "[process][guard]") {
  auto l = caf_port_limits_now();
  l.total = 16;
  refuses_beyond_cap(l, &caf_port_refusals::over_total_cap);
}

TEST_CASE("a CAF client closes a connection whose peer declares 4 GiB, before CAF allocates it",
          "[process][guard]") {
  // A stranger's listener that answers a connection with a server handshake
  // declaring 4 GiB: the client's side is no guarded port, so libcaf_io's
  // own header check (caf::io::basp::valid, taken over) is what refuses it -
  // the one check the Python binding keeps.
  auto listening = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(listening, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::listen(listening, 4) == 0);
  socklen_t len = sizeof a;
  ::getsockname(listening, reinterpret_cast<sockaddr*>(&a), &len);
  std::thread stranger{[listening] {
    int fd = ::accept(listening, nullptr, nullptr);
    if (fd < 0)
      return;
    auto h = header(0, 0xFFFFFFFFu);
    h.resize(h.size() + 1024, 0x5A);
    send_all(fd, h.data(), h.size());
    closed_within(fd, 5000ms);  // held until the client goes
    ::close(fd);
  }};
  auto before = rss_kib();
  auto refused = caf_port_refusals_now().oversized;
  {
    config cfg;
    caf::actor_system sys{cfg};
    auto remote = sys.middleman().remote_actor("127.0.0.1", ntohs(a.sin_port));
    CHECK_FALSE(remote);  // no node behind it
  }
  stranger.join();
  ::close(listening);
  CHECK(caf_port_refusals_now().oversized - refused == 1u);
  CHECK(rss_kib() - before < 64 * 1024);
}

TEST_CASE("under TLS, a holder of the cluster's certificate meets the same payload cap",
          "[process][guard][tls]") {
  char dir[] = "/tmp/kvferry-guard-tls-XXXXXX";
  REQUIRE(::mkdtemp(dir));
  std::string d = dir;
  auto cmd =
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 "
      "-subj /CN=insider -addext subjectAltName=IP:127.0.0.1 -keyout " +
      d + "/key.pem -out " + d + "/cert.pem >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    std::filesystem::remove_all(d);
    WARN("SKIPPED: the openssl command could not make a certificate");
    return;
  }
  tls_files files{d + "/cert.pem", d + "/key.pem", d + "/cert.pem", ""};
  config cfg;
  enable_tls(cfg, files);
  caf::actor_system sys{cfg};
  auto echo = sys.spawn([]() -> caf::behavior { return {[](int x) { return x + 1; }}; });
  auto port = publish_actor(sys, echo, 0, "127.0.0.1");
  REQUIRE(port);
  auto before = rss_kib();
  auto refused = caf_port_refusals_now().oversized;
  // The insider: a TLS client with the cluster's certificate, speaking BASP.
  auto* ctx = SSL_CTX_new(TLS_client_method());
  REQUIRE(SSL_CTX_use_certificate_file(ctx, files.certificate.c_str(), SSL_FILETYPE_PEM) == 1);
  REQUIRE(SSL_CTX_use_PrivateKey_file(ctx, files.key.c_str(), SSL_FILETYPE_PEM) == 1);
  int fd = connect_to(*port);
  REQUIRE(fd >= 0);
  auto* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, fd);
  REQUIRE(SSL_connect(ssl) == 1);  // the TLS handshake: it holds the certificate
  auto h = header(2, 0xFFFFFFFFu);
  h.resize(h.size() + 1024, 0x5A);
  REQUIRE(SSL_write(ssl, h.data(), static_cast<int>(h.size())) == static_cast<int>(h.size()));
  // Read (the server's BASP handshake) until the server closes.
  bool closed = false;
  auto until = std::chrono::steady_clock::now() + 3s;
  char buf[4096];
  while (!closed && std::chrono::steady_clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (SSL_pending(ssl) == 0 && ::poll(&p, 1, 50) <= 0)
      continue;
    closed = SSL_read(ssl, buf, sizeof buf) <= 0;
  }
  CHECK(closed);
  CHECK(caf_port_refusals_now().oversized - refused == 1u);
  CHECK(rss_kib() - before < 64 * 1024);
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  ::close(fd);
  caf::anon_send_exit(echo, caf::exit_reason::user_shutdown);
  std::filesystem::remove_all(d);
}

}  // namespace
