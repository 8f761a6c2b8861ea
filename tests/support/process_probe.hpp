// What the real-process tests look at in another process: its RSS and, by a
// piece of its command line, its pid.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "apps/common/child_process.hpp"

namespace kvferry::test {

/// VmRSS of `pid` in KiB (0 if gone); of this process by default.
inline long rss_kib(int pid = ::getpid()) {
  std::ifstream in{"/proc/" + std::to_string(pid) + "/status"};
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0)
      return std::strtol(line.c_str() + 6, nullptr, 10);
  return 0;
}

/// pids of the processes whose command line contains `needle`.
inline std::vector<int> pids_with(const std::string& needle) {
  std::vector<int> out;
  apps::child_process ps{{"/usr/bin/pgrep", "-f", "--", needle}};
  ps.wait(std::chrono::seconds{5});
  std::istringstream in{ps.output()};
  int pid = 0;
  while (in >> pid)
    if (pid != ::getpid())
      out.push_back(pid);
  return out;
}

}  // namespace kvferry::test
