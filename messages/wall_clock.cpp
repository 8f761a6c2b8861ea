#include "messages/wall_clock.hpp"

#include <cstdio>
#include <ctime>

namespace kvferry {

std::string utc_time(int64_t ns) {
  auto secs = static_cast<std::time_t>(ns / 1'000'000'000);
  auto millis = static_cast<int>((ns / 1'000'000) % 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char when[48];
  std::snprintf(when, sizeof(when), "%04d-%02d-%02d %02d:%02d:%02d.%03d UTC", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, millis);
  return when;
}

}  // namespace kvferry
