#include "apps/bench/process_meters.hpp"

#include <unistd.h>

#include <cstdint>
#include <fstream>

namespace kvferry::bench {

double cpu_us(int who) {
  rusage u{};
  ::getrusage(who, &u);
  auto us = [](const timeval& t) { return t.tv_sec * 1e6 + static_cast<double>(t.tv_usec); };
  return us(u.ru_utime) + us(u.ru_stime);
}

double rss_bytes() {
  std::ifstream statm{"/proc/self/statm"};
  uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return static_cast<double>(resident) * static_cast<double>(::sysconf(_SC_PAGESIZE));
}

}  // namespace kvferry::bench
