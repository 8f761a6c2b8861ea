// Unix-socket helpers of the shm backend: abstract-namespace listen/connect,
// whole-buffer reads, and passing one file descriptor with a message
// (SCM_RIGHTS). The owning fd and write_all are posix_socket.hpp's.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <string>
#include <vector>

#include "transport/base/posix_socket.hpp"
#include "transport/status.hpp"

namespace kvferry::transport::shm {

/// Longest name of an abstract socket (sun_path less the leading NUL).
constexpr size_t max_socket_name = 100;

/// Listens on the abstract Unix socket `name`.
result<socket_fd> listen_abstract(const std::string& name);

/// Connects to the abstract Unix socket `name`.
result<socket_fd> connect_abstract(const std::string& name);

/// Reads exactly `len` bytes. A descriptor passed with them is stored in
/// `*passed` (closed and refused as a protocol error when `passed` is null or
/// more than one arrives). connection_lost on EOF or error.
status read_exact(int fd, void* buf, size_t len, int* passed = nullptr);

/// Writes `len` bytes with `pass_fd` attached to them.
status write_with_fd(int fd, const void* buf, size_t len, int pass_fd);

}  // namespace kvferry::transport::shm
