// A TCP connection to a port of this machine's loopback, for tests that play
// a stranger (or a scraper) against a real listener.
#pragma once

#include <unistd.h>

#include <cstdint>

#include <netinet/in.h>
#include <sys/socket.h>

namespace kvferry::test {

/// A connected socket to 127.0.0.1:`port`, or -1.
inline int dial_loopback(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace kvferry::test
