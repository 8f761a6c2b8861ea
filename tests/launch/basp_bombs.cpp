#include "tests/launch/basp_bombs.hpp"

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/support/process_probe.hpp"
#include "tests/support/raw_tcp.hpp"

namespace kvferry::test {

namespace {

using namespace std::chrono_literals;

/// The client side of an attack connection: plain tcp, or TLS showing a
/// cluster certificate (the handshake done before any byte of BASP).
class attack_stream {
 public:
  attack_stream(uint16_t port, SSL_CTX* tls) : fd_(dial(port)) {
    if (fd_ < 0 || !tls)
      return;
    timeval tv{5, 0};  // a handshake the server never answers ends
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ssl_ = SSL_new(tls);
    SSL_set_fd(ssl_, fd_);
    if (SSL_connect(ssl_) != 1) {
      ERR_clear_error();
      SSL_free(ssl_);
      ssl_ = nullptr;
      ::close(fd_);
      fd_ = -1;
    }
  }
  attack_stream(const attack_stream&) = delete;
  attack_stream& operator=(const attack_stream&) = delete;
  ~attack_stream() {
    if (ssl_)
      SSL_free(ssl_);
    if (fd_ >= 0)
      ::close(fd_);
  }

  bool ok() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  bool tls() const { return ssl_ != nullptr; }

  bool send(const std::string& bytes) {
    if (!ssl_)
      return send_bytes(fd_, bytes.data(), bytes.size());
    return SSL_write(ssl_, bytes.data(), static_cast<int>(bytes.size())) ==
           static_cast<int>(bytes.size());
  }

  /// Exactly `n` bytes within `timeout`, or false.
  bool recv_exact(void* p, size_t n, std::chrono::milliseconds timeout) {
    if (!ssl_)
      return recv_bytes(fd_, p, n, timeout) == n;
    auto until = std::chrono::steady_clock::now() + timeout;
    size_t got = 0;
    while (got < n && std::chrono::steady_clock::now() < until) {
      int k = SSL_read(ssl_, static_cast<char*>(p) + got, static_cast<int>(n - got));
      if (k <= 0)
        return false;
      got += static_cast<size_t>(k);
    }
    return got == n;
  }

  /// After poll said readable: true when the other side ended the stream
  /// (end of stream, reset, a TLS close or alert), false when it sent bytes.
  bool ended_on_read() {
    char buf[4096];
    if (ssl_ && !nonblocking_) {  // a part of a record must not block the wait
      ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) | O_NONBLOCK);
      nonblocking_ = true;
    }
    if (!ssl_) {
      auto n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
      return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
    }
    int k = SSL_read(ssl_, buf, sizeof buf);
    if (k > 0)
      return false;
    int e = SSL_get_error(ssl_, k);
    ERR_clear_error();
    return e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE;
  }

 private:
  int fd_;
  SSL* ssl_ = nullptr;
  bool nonblocking_ = false;
};

using streams = std::vector<std::unique_ptr<attack_stream>>;

/// How many of `all` the other side closed within `timeout`.
int closed_within(streams& all, std::chrono::milliseconds timeout) {
  std::vector<bool> closed(all.size(), false);
  auto until = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::vector<pollfd> p;
    std::vector<size_t> which;
    for (size_t i = 0; i < all.size(); ++i)
      if (!closed[i] && all[i]->ok()) {
        p.push_back({all[i]->fd(), POLLIN, 0});
        which.push_back(i);
      }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (p.empty() || left.count() <= 0)
      break;
    if (::poll(p.data(), p.size(), static_cast<int>(std::min<long>(left.count(), 200))) < 0)
      break;
    for (size_t k = 0; k < p.size(); ++k)
      if (p[k].revents && all[which[k]]->ended_on_read())
        closed[which[k]] = true;
  }
  return static_cast<int>(std::count(closed.begin(), closed.end(), true));
}

/// True when `port` speaks BASP: a CAF port sends its server handshake (a
/// header of operation 0) to whoever connects (inside TLS under [tls]),
/// before any byte comes in.
bool speaks_basp(uint16_t port, SSL_CTX* tls) {
  attack_stream s{port, tls};
  if (!s.ok())
    return false;
  unsigned char h[32] = {};
  return s.recv_exact(h, sizeof h, 1000ms) && h[0] == 0;
}

/// A BASP header of operation `op` declaring `len` payload bytes, and 1 KiB.
std::string bomb(uint8_t op, uint32_t len) {
  std::string h(32, '\0');
  h[0] = static_cast<char>(op);
  for (int b = 0; b < 4; ++b)
    h[4 + b] = static_cast<char>(len >> (24 - 8 * b));
  return h + std::string(1024, '\x5a');
}

struct ssl_ctx_deleter {
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
};

}  // namespace

bomb_findings bomb_caf_ports(const bomb_target& a, const bomb_target& b,
                             const std::optional<tls_files>& as) {
  bomb_findings f;
  // 1,000 connections and the rest: more descriptors than the usual soft limit.
  rlimit nofile{};
  if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < 4096) {
    nofile.rlim_cur = std::min<rlim_t>(4096, nofile.rlim_max);
    ::setrlimit(RLIMIT_NOFILE, &nofile);
  }
  std::unique_ptr<SSL_CTX, ssl_ctx_deleter> ctx;
  if (as) {
    ctx.reset(SSL_CTX_new(TLS_client_method()));
    if (SSL_CTX_use_certificate_file(ctx.get(), as->certificate.c_str(), SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx.get(), as->key.c_str(), SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_load_verify_locations(ctx.get(), as->cafile.c_str(), nullptr) != 1) {
      f.error = "cannot load the certificate " + as->certificate;
      return f;
    }
    SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  }
  std::vector<uint16_t> caf_ports;
  for (auto* t : {&a, &b})
    for (auto p : t->ports)
      if (speaks_basp(p, ctx.get()))
        caf_ports.push_back(p);
  f.caf_ports = caf_ports.size();
  if (caf_ports.empty()) {
    f.error = as ? "no port answered a TLS client with BASP" : "no port answered with BASP";
    return f;
  }
  int pids[2] = {a.pid, b.pid};
  for (int k = 0; k < 2; ++k)
    f.rss_before[k] = f.rss_peak[k] = rss_kib(pids[k]);
  streams held, drip, crowd;
  const uint32_t sizes[] = {1u << 30, 3u << 30, 0xFFFFFFFFu};
  for (auto port : caf_ports) {
    int n = 0;
    for (uint8_t op : {1, 2, 0, 6}) {
      auto s = std::make_unique<attack_stream>(port, ctx.get());
      if (!s->ok())
        continue;
      s->send(bomb(op, sizes[n++ % 3]));
      held.push_back(std::move(s));
    }
    if (auto s = std::make_unique<attack_stream>(port, ctx.get()); s->ok())
      drip.push_back(std::move(s));
  }
  f.bombs = static_cast<int>(held.size());
  f.drips = static_cast<int>(drip.size());
  // 1,000 plain connections at once, spread over the ports, held silent (the
  // caps come before TLS: under [tls] they never start its handshake).
  for (int i = 0; i < 1000; ++i)
    if (auto s = std::make_unique<attack_stream>(
            caf_ports[static_cast<size_t>(i) % caf_ports.size()], nullptr);
        s->ok())
      crowd.push_back(std::move(s));
  f.crowd = static_cast<int>(crowd.size());
  // The drips: a byte each every 100 ms for 7 s (past the 5 s handshake
  // deadline); the RSS of both nodes meanwhile.
  std::vector<bool> drip_open(drip.size(), true);
  for (int t = 0; t < 70; ++t) {
    for (size_t i = 0; i < drip.size(); ++i)
      if (drip_open[i] && !drip[i]->send("\x01"))
        drip_open[i] = false;
    for (int k = 0; k < 2; ++k)
      f.rss_peak[k] = std::max(f.rss_peak[k], rss_kib(pids[k]));
    std::this_thread::sleep_for(100ms);
  }
  f.bombs_closed = closed_within(held, 3000ms);
  f.drips_closed = closed_within(drip, 3000ms);
  f.crowd_closed = closed_within(crowd, 3000ms);
  for (int k = 0; k < 2; ++k)
    f.rss_peak[k] = std::max(f.rss_peak[k], rss_kib(pids[k]));
  return f;
}

void check_bombs_cost_nothing(const bomb_findings& f) {
  std::fprintf(stderr,
               "hostile: %zu CAF ports; %d bombs (%d closed), %d drips (%d closed), %d crowd "
               "(%d closed); RSS decode %ld -> peak %ld KiB, prefill %ld -> peak %ld KiB\n",
               f.caf_ports, f.bombs, f.bombs_closed, f.drips, f.drips_closed, f.crowd,
               f.crowd_closed, f.rss_before[0], f.rss_peak[0], f.rss_before[1], f.rss_peak[1]);
  REQUIRE(f.error.empty());
  CHECK(f.caf_ports >= 3);  // bootstrap, status of each node (decider, ranks' ports)
  CHECK(f.bombs == 4 * static_cast<int>(f.caf_ports));
  CHECK(f.bombs_closed == f.bombs);
  CHECK(f.drips == static_cast<int>(f.caf_ports));
  CHECK(f.drips_closed == f.drips);
  CHECK(f.crowd == 1000);
  CHECK(f.crowd_closed == f.crowd);
  for (int k = 0; k < 2; ++k) {
    INFO("target " << k << " RSS before the bombs " << f.rss_before[k] << " KiB, peak "
                   << f.rss_peak[k] << " KiB");
    CHECK(f.rss_peak[k] - f.rss_before[k] < 64 * 1024);
  }
}

}  // namespace kvferry::test
