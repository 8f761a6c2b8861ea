// Unix-socket helpers of the shm backend: an owning fd, abstract-namespace
// listen/connect, whole-buffer reads and writes, and passing one file
// descriptor with a message (SCM_RIGHTS).
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <string>
#include <vector>

#include "transport/status.hpp"

namespace kvferry::transport::shm {

/// Owns a file descriptor; closes it on destruction.
class unix_fd {
 public:
  unix_fd() = default;
  explicit unix_fd(int fd) : fd_(fd) {}
  unix_fd(unix_fd&& other) noexcept : fd_(other.release()) {}
  unix_fd& operator=(unix_fd&& other) noexcept;
  unix_fd(const unix_fd&) = delete;
  unix_fd& operator=(const unix_fd&) = delete;
  ~unix_fd() { close(); }

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

/// Longest name of an abstract socket (sun_path less the leading NUL).
constexpr size_t max_socket_name = 100;

/// Listens on the abstract Unix socket `name`.
result<unix_fd> listen_abstract(const std::string& name);

/// Connects to the abstract Unix socket `name`.
result<unix_fd> connect_abstract(const std::string& name);

/// Reads exactly `len` bytes. A descriptor passed with them is stored in
/// `*passed` (closed and refused as a protocol error when `passed` is null or
/// more than one arrives). connection_lost on EOF or error.
status read_exact(int fd, void* buf, size_t len, int* passed = nullptr);

/// Writes every byte described by `iov` (modified in place as it advances).
status write_all(int fd, std::vector<iovec>& iov);

/// Writes `len` bytes with `pass_fd` attached to them.
status write_with_fd(int fd, const void* buf, size_t len, int pass_fd);

}  // namespace kvferry::transport::shm
