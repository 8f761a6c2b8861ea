// A loopback TCP port that nothing listens on right now (bound, then closed):
// for cluster files that tests write.
#pragma once

#include <unistd.h>

#include <cstdint>

#include <netinet/in.h>
#include <sys/socket.h>

#include <catch2/catch.hpp>

namespace kvferry::test {

inline uint16_t free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

}  // namespace kvferry::test
