// Raw tcp for the tests that play an attacker against real listeners: the
// ports a process listens on, a connection with bounded sends, whole sends,
// bounded reads, and a wait for the other side to close.
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <netinet/in.h>

#include <dirent.h>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace kvferry::test {

using namespace std::chrono_literals;

/// The loopback/any tcp ports `pid` listens on: its socket inodes matched
/// against /proc/net/tcp{,6} rows in state LISTEN (0A).
inline std::set<uint16_t> listening_ports(int pid) {
  std::set<unsigned long> inodes;
  auto dir = "/proc/" + std::to_string(pid) + "/fd";
  if (DIR* d = ::opendir(dir.c_str())) {
    while (auto* e = ::readdir(d)) {
      char target[128];
      auto n = ::readlink((dir + "/" + e->d_name).c_str(), target, sizeof(target) - 1);
      if (n <= 0)
        continue;
      target[n] = 0;
      unsigned long inode = 0;
      if (std::sscanf(target, "socket:[%lu]", &inode) == 1)
        inodes.insert(inode);
    }
    ::closedir(d);
  }
  std::set<uint16_t> out;
  for (auto table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in{table};
    std::string line;
    std::getline(in, line);  // the heading
    while (std::getline(in, line)) {
      std::istringstream row{line};
      std::string sl, local, remote, st, queues, timer, retr, uid, timeout;
      unsigned long inode = 0;
      row >> sl >> local >> remote >> st >> queues >> timer >> retr >> uid >> timeout >> inode;
      if (st != "0A" || !inodes.count(inode))
        continue;
      auto colon = local.rfind(':');
      out.insert(static_cast<uint16_t>(std::stoul(local.substr(colon + 1), nullptr, 16)));
    }
  }
  return out;
}

/// A tcp connection to 127.0.0.1:`port` with bounded sends (-1 on failure).
inline int dial(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  timeval tv{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

inline bool send_bytes(int fd, const void* p, size_t n) {
  auto* c = static_cast<const char*>(p);
  while (n > 0) {
    auto k = ::send(fd, c, n, MSG_NOSIGNAL);
    if (k <= 0)
      return false;
    c += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

/// Reads exactly `n` bytes within `timeout`: n on success, else what arrived
/// before the end of the stream (or the timeout).
inline size_t recv_bytes(int fd, void* p, size_t n, std::chrono::milliseconds timeout) {
  auto* c = static_cast<char*>(p);
  size_t got = 0;
  auto until = std::chrono::steady_clock::now() + timeout;
  while (got < n) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      break;
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0)
      break;
    auto k = ::recv(fd, c + got, n - got, 0);
    if (k <= 0)
      break;
    got += static_cast<size_t>(k);
  }
  return got;
}

/// How a connection ended, seen from this side.
enum class ending { closed, open };

/// Waits until every fd in `fds` was closed by the other side (end of stream
/// or reset), reading and discarding what arrives, or until `timeout`.
inline std::vector<ending> wait_closed(const std::vector<int>& fds,
                                       std::chrono::milliseconds timeout) {
  std::vector<ending> out(fds.size(), ending::open);
  auto until = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::vector<pollfd> p;
    std::vector<size_t> which;
    for (size_t i = 0; i < fds.size(); ++i)
      if (out[i] == ending::open && fds[i] >= 0) {
        p.push_back({fds[i], POLLIN, 0});
        which.push_back(i);
      }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (p.empty() || left.count() <= 0)
      return out;
    if (::poll(p.data(), p.size(), static_cast<int>(std::min<long>(left.count(), 200))) < 0)
      return out;
    for (size_t k = 0; k < p.size(); ++k) {
      if (!p[k].revents)
        continue;
      char buf[4096];
      auto n = ::recv(p[k].fd, buf, sizeof(buf), MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
        out[which[k]] = ending::closed;
    }
  }
}

}  // namespace kvferry::test
