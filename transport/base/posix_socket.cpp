#include "transport/base/posix_socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

namespace kvferry::transport {

std::string errno_text(int err) {
  return std::string{std::strerror(err)} + " (errno " + std::to_string(err) + ")";
}

namespace {

// At most IOV_MAX entries per readv/writev.
constexpr size_t iov_chunk = IOV_MAX;

/// Drops the bytes `n` from the front of `iov`, starting at index `first`.
size_t advance(std::vector<iovec>& iov, size_t first, size_t n) {
  while (n > 0 && first < iov.size()) {
    if (n >= iov[first].iov_len) {
      n -= iov[first].iov_len;
      iov[first].iov_len = 0;
      ++first;
    } else {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + n;
      iov[first].iov_len -= n;
      n = 0;
    }
  }
  while (first < iov.size() && iov[first].iov_len == 0)
    ++first;
  return first;
}

}  // namespace

socket_fd& socket_fd::operator=(socket_fd&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.release();
  }
  return *this;
}

void socket_fd::close() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

void socket_fd::shutdown() const {
  if (fd_ >= 0)
    ::shutdown(fd_, SHUT_RDWR);
}

void socket_fd::shutdown_write() const {
  if (fd_ >= 0)
    ::shutdown(fd_, SHUT_WR);
}

result<host_port> parse_endpoint(const std::string& endpoint) {
  constexpr std::string_view scheme = "tcp://";
  auto bad = [&] {
    return status::invalid_argument("endpoint '" + endpoint +
                                    "', expected tcp://<host>:<port> for the tcp backend");
  };
  if (endpoint.rfind(scheme, 0) != 0)
    return bad();
  auto rest = endpoint.substr(scheme.size());
  auto colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == rest.size())
    return bad();
  auto port_text = rest.substr(colon + 1);
  if (!std::all_of(port_text.begin(), port_text.end(), ::isdigit) || port_text.size() > 5)
    return bad();
  auto port = std::stoul(port_text);
  if (port == 0 || port > 65535)
    return bad();
  auto host = rest.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  return host_port{host, static_cast<uint16_t>(port)};
}

result<std::pair<socket_fd, uint16_t>> listen_on(const std::string& host, uint16_t port,
                                                 int buffer_bytes) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  auto port_text = std::to_string(port);
  if (int rc =
          ::getaddrinfo(host.empty() ? nullptr : host.c_str(), port_text.c_str(), &hints, &res);
      rc != 0)
    return status::invalid_argument("cannot resolve listen address '" + host +
                                    "': " + gai_strerror(rc));
  status last = status::io_error("no address to listen on for '" + host + "'");
  for (auto* ai = res; ai != nullptr; ai = ai->ai_next) {
    socket_fd fd{::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol)};
    if (!fd.valid()) {
      last = status::io_error("socket(): " + errno_text(errno));
      continue;
    }
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    set_buffers(fd.get(), buffer_bytes);
    if (::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd.get(), 128) != 0) {
      last =
          status::io_error("cannot listen on " + host + ":" + port_text + ": " + errno_text(errno));
      continue;
    }
    sockaddr_storage bound{};
    socklen_t len = sizeof(bound);
    ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &len);
    uint16_t actual = bound.ss_family == AF_INET6
                          ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                          : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    ::freeaddrinfo(res);
    return std::pair<socket_fd, uint16_t>{std::move(fd), actual};
  }
  ::freeaddrinfo(res);
  return last;
}

result<socket_fd> connect_to(const host_port& where, int timeout_ms, int buffer_bytes) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  auto port_text = std::to_string(where.port);
  auto name = where.host + ":" + port_text;
  if (int rc = ::getaddrinfo(where.host.c_str(), port_text.c_str(), &hints, &res); rc != 0)
    return status::connect_failed("cannot resolve " + name + ": " + gai_strerror(rc));
  status last = status::connect_failed("no address for " + name);
  for (auto* ai = res; ai != nullptr; ai = ai->ai_next) {
    socket_fd fd{::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol)};
    if (!fd.valid()) {
      last = status::io_error("socket(): " + errno_text(errno));
      continue;
    }
    set_buffers(fd.get(), buffer_bytes);
    // Non-blocking connect bounded by the timeout, then back to blocking I/O.
    int flags = ::fcntl(fd.get(), F_GETFL, 0);
    ::fcntl(fd.get(), F_SETFL, flags | O_NONBLOCK);
    int rc = ::connect(fd.get(), ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd pfd{fd.get(), POLLOUT, 0};
      rc = ::poll(&pfd, 1, timeout_ms);
      if (rc == 0) {
        last = status::connect_failed("connect to " + name + ": no answer within " +
                                      std::to_string(timeout_ms) + " ms");
        continue;
      }
      int err = 0;
      socklen_t len = sizeof(err);
      ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      rc = err == 0 && rc > 0 ? 0 : -1;
      errno = err;
    }
    if (rc != 0) {
      last = status::connect_failed("connect to " + name + ": " + errno_text(errno));
      continue;
    }
    ::fcntl(fd.get(), F_SETFL, flags);
    tune(fd.get());
    ::freeaddrinfo(res);
    return fd;
  }
  ::freeaddrinfo(res);
  return last;
}

void tune(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

std::string format_endpoint(const std::string& scheme, const std::string& host, uint16_t port) {
  auto h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return scheme + "://" + h + ":" + std::to_string(port);
}

void set_receive_timeout(int fd, int ms) {
  timeval tv{ms / 1000, (ms % 1000) * 1000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

void set_user_timeout(int fd, int ms) {
  if (ms <= 0)
    return;
  unsigned timeout = static_cast<unsigned>(ms);
  ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &timeout, sizeof(timeout));
  int one = 1, idle = 1, interval = 1, count = std::max(1, ms / 1000);
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
}

void set_buffers(int fd, int bytes) {
  if (bytes <= 0)
    return;
  // The kernel caps them at the sysctls (an administrator's limit is kept).
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
}

status discard_exact(int fd, uint64_t n) {
  std::vector<char> scratch(std::min<uint64_t>(n, 1 << 16));
  while (n > 0) {
    auto len = std::min<uint64_t>(n, scratch.size());
    if (auto st = read_exact(fd, scratch.data(), len); !st.ok())
      return st;
    n -= len;
  }
  return {};
}

status read_exact(int fd, void* buf, size_t len) {
  auto* p = static_cast<char*>(buf);
  while (len > 0) {
    auto n = ::recv(fd, p, len, 0);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
    } else if (n == 0) {
      return status::connection_lost("peer closed the connection");
    } else if (errno != EINTR) {
      return status::connection_lost("recv: " + errno_text(errno));
    }
  }
  return {};
}

status write_all(int fd, std::vector<iovec>& iov) {
  size_t first = advance(iov, 0, 0);
  while (first < iov.size()) {
    msghdr msg{};
    msg.msg_iov = iov.data() + first;
    msg.msg_iovlen = std::min(iov.size() - first, iov_chunk);
    auto n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return status::connection_lost("sendmsg: " + errno_text(errno));
    }
    first = advance(iov, first, static_cast<size_t>(n));
  }
  return {};
}

status read_all(int fd, std::vector<iovec>& iov) {
  size_t first = advance(iov, 0, 0);
  while (first < iov.size()) {
    auto cnt = static_cast<int>(std::min(iov.size() - first, iov_chunk));
    auto n = ::readv(fd, iov.data() + first, cnt);
    if (n == 0)
      return status::connection_lost("peer closed the connection");
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return status::connection_lost("readv: " + errno_text(errno));
    }
    first = advance(iov, first, static_cast<size_t>(n));
  }
  return {};
}

}  // namespace kvferry::transport
