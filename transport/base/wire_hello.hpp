// The opening of a wire backend's connection (tcp, shm, verbs): the
// backend's hello struct (its magic and version as defaults, name_len, and
// whatever else the backend puts in it), then the sender's endpoint, which
// the receiver uses to find its connections for disconnect() and its
// grants; then the challenge and response that prove the sender was given
// the credential for that endpoint (transport/base/peer_auth.hpp).
#pragma once

#include <sys/uio.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "transport/base/peer_auth.hpp"
#include "transport/base/posix_socket.hpp"
#include "transport/status.hpp"

namespace kvferry::transport {

/// A sender as it opens a connection: its own endpoint, the credential the
/// receiver gave for it (empty: none), and the receiver's endpoint.
struct sender_identity {
  std::string name;
  std::string credential;
  std::string receiver;
};

/// Writes `h` with the first `max_name` bytes of `name` after it.
template <class Hello>
status send_hello(int fd, Hello h, const std::string& name, uint32_t max_name) {
  h.name_len = static_cast<uint32_t>(std::min<size_t>(name.size(), max_name));
  std::vector<iovec> iov{{&h, sizeof(h)}, {const_cast<char*>(name.data()), h.name_len}};
  return kvferry::transport::write_all(fd, iov);
}

/// Opens a connection as `who`: the hello, then the answer to the
/// receiver's challenge.
template <class Hello>
status introduce(int fd, Hello h, const sender_identity& who, uint32_t max_name) {
  if (auto st = send_hello(fd, h, who.name, max_name); !st.ok())
    return st;
  return answer_challenge(fd, who.credential, who.receiver);
}

/// Reads a hello into `h` and the name after it: nullopt when the peer is
/// not of this backend and version (magic or version differ from Hello's
/// defaults), names more than `max_name` bytes, or the connection ends.
template <class Hello>
std::optional<std::string> receive_hello(int fd, Hello& h, uint32_t max_name) {
  const Hello expected;
  if (!kvferry::transport::read_exact(fd, &h, sizeof(h)).ok() || h.magic != expected.magic ||
      h.version != expected.version || h.name_len > max_name)
    return std::nullopt;
  std::string name(h.name_len, '\0');
  if (!kvferry::transport::read_exact(fd, name.data(), name.size()).ok())
    return std::nullopt;
  return name;
}

}  // namespace kvferry::transport
