#include "actors/common/durations.hpp"

#include <cstdint>
#include <cstdio>

namespace kvferry {

std::string format_duration(std::chrono::nanoseconds d) {
  using namespace std::chrono;
  auto ns = d.count();
  char buf[64];
  auto fmt = [&](double v, const char* unit) {
    if (v == static_cast<double>(static_cast<int64_t>(v)))
      std::snprintf(buf, sizeof(buf), "%lld%s", static_cast<long long>(v), unit);
    else
      std::snprintf(buf, sizeof(buf), "%.3g%s", v, unit);
    return std::string{buf};
  };
  if (ns >= 1'000'000'000)
    return fmt(ns / 1e9, "s");
  if (ns >= 1'000'000)
    return fmt(ns / 1e6, "ms");
  if (ns >= 1'000)
    return fmt(ns / 1e3, "us");
  return fmt(static_cast<double>(ns), "ns");
}

}  // namespace kvferry
