#include "transport/shm/shm_socket.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace kvferry::transport::shm {

namespace {

/// The address of abstract socket `name`, and its length.
std::pair<sockaddr_un, socklen_t> abstract_address(const std::string& name) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  addr.sun_path[0] = '\0';
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  return {addr, static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size())};
}

status check_name(const std::string& name) {
  if (name.empty() || name.size() > max_socket_name)
    return status::invalid_argument("socket name of " + std::to_string(name.size()) +
                                    " characters, expected 1 to " +
                                    std::to_string(max_socket_name));
  return {};
}

}  // namespace

result<socket_fd> listen_abstract(const std::string& name) {
  if (auto st = check_name(name); !st.ok())
    return st;
  socket_fd fd{::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  if (!fd.valid())
    return status::io_error("socket(AF_UNIX): " + errno_text(errno));
  auto [addr, len] = abstract_address(name);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0)
    return status::io_error("bind to abstract socket '" + name + "': " + errno_text(errno));
  if (::listen(fd.get(), 64) != 0)
    return status::io_error("listen on abstract socket '" + name + "': " + errno_text(errno));
  return fd;
}

result<socket_fd> connect_abstract(const std::string& name) {
  if (auto st = check_name(name); !st.ok())
    return st;
  socket_fd fd{::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  if (!fd.valid())
    return status::io_error("socket(AF_UNIX): " + errno_text(errno));
  auto [addr, len] = abstract_address(name);
  int rc;
  do {
    rc = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), len);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0)
    return status::connect_failed("connect to abstract socket '" + name +
                                  "': " + errno_text(errno));
  return fd;
}

status read_exact(int fd, void* buf, size_t len, int* passed) {
  auto* p = static_cast<char*>(buf);
  while (len > 0) {
    iovec iov{p, len};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    auto n = ::recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return status::connection_lost("recvmsg: " + errno_text(errno));
    // Take every descriptor that came, so none leaks, before judging them.
    std::vector<int> fds;
    for (auto* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
        continue;
      auto count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int one;
        std::memcpy(&one, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        fds.push_back(one);
      }
    }
    bool refused = (msg.msg_flags & MSG_CTRUNC) != 0 || fds.size() > 1 ||
                   (!fds.empty() && (passed == nullptr || *passed >= 0));
    if (refused) {
      for (int f : fds)
        ::close(f);
      return status::protocol_error(std::to_string(fds.size()) +
                                    " file descriptors where at most one was expected");
    }
    if (!fds.empty())
      *passed = fds[0];
    if (n == 0)
      return status::connection_lost("peer closed the connection");
    p += n;
    len -= static_cast<size_t>(n);
  }
  return {};
}

status write_with_fd(int fd, const void* buf, size_t len, int pass_fd) {
  iovec iov{const_cast<void*>(buf), len};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  auto* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
  ssize_t n;
  do {
    n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n < 0)
    return status::connection_lost("sendmsg with a file descriptor: " + errno_text(errno));
  // The descriptor went with the first byte; the rest carries none.
  std::vector<iovec> rest{
      {static_cast<char*>(const_cast<void*>(buf)) + n, len - static_cast<size_t>(n)}};
  return write_all(fd, rest);
}

}  // namespace kvferry::transport::shm
