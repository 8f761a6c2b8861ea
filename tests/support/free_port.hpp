// A loopback TCP port that nothing listens on right now (bound, then closed):
// for cluster files that tests write. One process never gets the same port
// twice: the kernel may hand a port just closed out again at the next bind,
// and two of a cluster file's ports then collide (seen in per_rank_soak:
// bootstrap_port and status_port both 48027, the cluster file refused).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <mutex>
#include <set>

#include <netinet/in.h>
#include <sys/socket.h>

#include <catch2/catch.hpp>

namespace kvferry::test {

inline uint16_t free_port() {
  static std::mutex mu;
  static std::set<uint16_t> given;
  std::lock_guard guard{mu};
  for (int attempt = 0; attempt < 1000; ++attempt) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
    socklen_t len = sizeof(a);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    ::close(fd);
    auto port = ntohs(a.sin_port);
    if (given.insert(port).second)
      return port;
  }
  FAIL("free_port: 1000 binds in a row gave ports this process was given before");
  return 0;
}

}  // namespace kvferry::test
