// The payload of a batch on a socket as a list of runs of memory: host runs
// move with writev/readv straight from and into place, device runs through a
// device_copier's pinned pieces (tcp's sender and receiver).
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "transport/device_memory.hpp"
#include "transport/status.hpp"

namespace kvferry::transport {

/// `length` bytes at `base`, of `kind` memory.
struct memory_run {
  std::byte* base = nullptr;
  uint64_t length = 0;
  memory_kind kind = memory_kind::host;
};

/// Appends a run, merging it into the last one when both are host memory and
/// it continues it. Zero lengths are dropped.
void append_run(std::vector<memory_run>& runs, std::byte* base, uint64_t length, memory_kind kind);

/// Writes `head` (headers) and then every run to `fd`. Device runs need
/// `device` (invalid_argument otherwise, before anything is written). Any
/// error leaves the stream cut short: the caller drops the connection.
status send_runs(int fd, std::vector<iovec> head, const std::vector<memory_run>& runs,
                 device_copier* device);

/// What receive_runs() ran into: a socket error leaves the stream unusable; a
/// device error (the bytes were read off the socket and thrown away) refuses
/// the batch and leaves the stream in step.
struct receive_outcome {
  status link;
  status placed;
};

/// Reads every run's bytes from `fd` into place, in order.
receive_outcome receive_runs(int fd, const std::vector<memory_run>& runs, device_copier* device);

}  // namespace kvferry::transport
