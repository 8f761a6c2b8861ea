// Wall-clock time as kvferry carries it across processes (ns since the Unix
// epoch) and words it in causes and logs.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace kvferry {

/// Now, in ns since the Unix epoch (the system clock, shared by every process
/// of a host and, within NTP's error, of a cluster).
inline int64_t wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// A wall-clock time (ns since the Unix epoch) as causes word it:
/// "2026-12-01 12:00:01.234 UTC".
std::string utc_time(int64_t ns);

}  // namespace kvferry
