// Blocking socket helpers the wire backends share (tcp, shm, verbs): an owning fd, errno
// text, endpoint parsing,
// listen/connect, and loops that move whole buffers.
#pragma once

#include <sys/uio.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "transport/status.hpp"

namespace kvferry::transport {

/// strerror(err) with the number, for error messages.
std::string errno_text(int err);

/// Owns a file descriptor; closes it on destruction.
class socket_fd {
 public:
  socket_fd() = default;
  explicit socket_fd(int fd) : fd_(fd) {}
  socket_fd(socket_fd&& other) noexcept : fd_(other.release()) {}
  socket_fd& operator=(socket_fd&& other) noexcept;
  socket_fd(const socket_fd&) = delete;
  socket_fd& operator=(const socket_fd&) = delete;
  ~socket_fd() { close(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void close();
  /// Wakes threads blocked on the socket (both directions) without closing it.
  void shutdown() const;
  /// Stops sending only: the peer reads end-of-stream once it read what was sent.
  void shutdown_write() const;

 private:
  int fd_ = -1;
};

struct host_port {
  std::string host;
  uint16_t port = 0;
};

/// Parses "tcp://host:port".
result<host_port> parse_endpoint(const std::string& endpoint);

/// "scheme://host:port", an IPv6 host in brackets (what parse_endpoint reads).
std::string format_endpoint(const std::string& scheme, const std::string& host, uint16_t port);

/// Listens on host:port (port 0: any); returns the socket and the bound port.
/// `buffer_bytes` > 0: socket buffers of accepted connections (set_buffers on
/// the listener, before bind, so that the window scale covers them).
result<std::pair<socket_fd, uint16_t>> listen_on(const std::string& host, uint16_t port,
                                                 int buffer_bytes = 0);

/// Connects, giving up after `timeout_ms`, and sets TCP_NODELAY. `buffer_bytes`
/// > 0: socket buffers (set_buffers, before connecting).
result<socket_fd> connect_to(const host_port& where, int timeout_ms, int buffer_bytes = 0);

/// Reads exactly `len` bytes. Returns connection_lost on EOF or error.
status read_exact(int fd, void* buf, size_t len);

/// Reads `n` bytes and throws them away (the rest of a refused batch).
status discard_exact(int fd, uint64_t n);

/// Writes every byte described by `iov` (modified in place as it advances).
status write_all(int fd, std::vector<iovec>& iov);

/// Reads into every buffer described by `iov` (modified in place as it advances).
status read_all(int fd, std::vector<iovec>& iov);

/// Sets TCP_NODELAY.
void tune(int fd);

/// How a backend's data connections are set up (tcp: tcp_options::socket_buffer
/// and user_timeout_ms).
struct socket_tuning {
  int buffer_bytes = 0;     ///< set_buffers(), 0: the kernel's autotuning
  int user_timeout_ms = 0;  ///< set_user_timeout(), 0: the kernel's default
};

/// Makes a connection whose sent bytes stay unacknowledged for `ms` fail
/// (TCP_USER_TIMEOUT), and probes an idle one every second (keepalive), so
/// that a path that silently stops carrying packets errors out within `ms`
/// instead of the kernel's many minutes of retransmissions. No-op for `ms` <= 0.
void set_user_timeout(int fd, int ms);

/// Reads `n` items of a trivially copyable `T` into `out` (replacing what
/// it held) in pieces of at most 64 KiB: what a peer announces costs memory
/// only as its bytes arrive.
template <class T>
status read_items(int fd, std::vector<T>& out, size_t n) {
  static_assert(std::is_trivially_copyable_v<T>);
  constexpr size_t piece = std::max<size_t>(1, (64u << 10) / sizeof(T));
  out.clear();
  while (out.size() < n) {
    size_t at = out.size();
    size_t k = std::min(piece, n - at);
    out.resize(at + k);
    if (auto st = kvferry::transport::read_exact(fd, out.data() + at, k * sizeof(T)); !st.ok())
      return st;
  }
  return {};
}

/// SO_RCVTIMEO: a read that waits longer than `ms` fails (0: waits forever).
void set_receive_timeout(int fd, int ms);

/// Sets SO_SNDBUF and SO_RCVBUF to `bytes` each (the kernel doubles them for
/// its bookkeeping and caps them at net.core.wmem_max / rmem_max). A fixed size
/// turns the kernel's autotuning off for that socket. No-op for `bytes` <= 0.
void set_buffers(int fd, int bytes);

}  // namespace kvferry::transport
