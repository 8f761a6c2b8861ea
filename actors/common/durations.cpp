#include "actors/common/durations.hpp"

#include <cstdint>
#include <string>

namespace kvferry {

std::string format_duration(std::chrono::nanoseconds d) {
  struct unit {
    int64_t ns;
    const char* name;
  };
  // The largest unit the value has at least one of; up to 3 decimals, trimmed.
  for (auto u : {unit{60'000'000'000, "min"}, unit{1'000'000'000, "s"}, unit{1'000'000, "ms"},
                 unit{1'000, "us"}}) {
    if (d.count() < u.ns || (u.ns == 60'000'000'000 && d.count() % u.ns != 0))
      continue;  // minutes only when whole: "90s", not "1.5min"
    auto whole = d.count() / u.ns;
    auto frac = (d.count() % u.ns) * 1000 / u.ns;  // thousandths
    std::string out = std::to_string(whole);
    if (frac != 0) {
      auto digits = std::to_string(frac);
      digits = std::string(3 - digits.size(), '0') + digits;
      digits.erase(digits.find_last_not_of('0') + 1);
      out += "." + digits;
    }
    return out + u.name;
  }
  return std::to_string(d.count()) + "ns";
}

}  // namespace kvferry
