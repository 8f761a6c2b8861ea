// What names this process among every process that could read a handle it
// hands out: the device copiers' shared handles carry it, so that a handle
// read back in the process that made it is used as an address, not opened.
// A pid alone does not name a process across pid namespaces (two containers
// may both be pid 1), so a random number drawn once per process goes with it.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <random>

namespace kvferry::transport {

/// Drawn once per process (random, mixed with the pid); the same for every
/// caller in it.
inline uint64_t this_process() {
  static const uint64_t id = [] {
    std::random_device rd;
    return (uint64_t{rd()} << 32) ^ rd() ^ static_cast<uint64_t>(::getpid());
  }();
  return id;
}

}  // namespace kvferry::transport
