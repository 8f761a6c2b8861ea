// This process's figures for Prometheus, read from /proc at each collection:
// resident memory, open file descriptors, and established TCP connections
// (its sockets found in /proc/net/tcp and tcp6). Labelled with `labels`
// (process and node).
#pragma once

#include <cstdint>

#include "actors/metrics/registry.hpp"

namespace kvferry::metrics {

/// What /proc says of this process now (0 where it cannot be read).
struct process_reading {
  uint64_t resident_bytes = 0;
  uint64_t open_fds = 0;
  uint64_t open_connections = 0;
};
process_reading read_process();

/// Sets the process gauges of `reg` at each of its collections.
void watch_process(registry& reg, const label_set& labels);

}  // namespace kvferry::metrics
