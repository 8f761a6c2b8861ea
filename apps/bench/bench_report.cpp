#include "apps/bench/bench_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>

namespace kvferry::bench {

namespace {

std::string num(double x) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.6g", x);
  return buf;
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

void print(const figure& f, bool json) {
  std::ostringstream os;
  if (json) {
    os << "{\"suite\":" << quoted(f.suite) << ",\"metric\":" << quoted(f.metric)
       << ",\"value\":" << num(f.value) << ",\"unit\":" << quoted(f.unit);
    if (f.baseline) {
      os << ",\"baseline\":" << num(*f.baseline)
         << ",\"ratio\":" << num(*f.baseline != 0 ? f.value / *f.baseline : 0);
      if (!f.baseline_name.empty())
        os << ",\"baseline_is\":" << quoted(f.baseline_name);
    }
    os << ",\"reps\":" << f.reps;
    for (auto& [k, v] : f.extra)
      os << "," << quoted(k) << ":" << num(v);
    for (auto& [k, v] : f.notes)
      os << "," << quoted(k) << ":" << quoted(v);
    os << "}";
  } else {
    os << f.suite << "." << f.metric << " = " << num(f.value) << " " << f.unit;
    if (f.baseline)
      os << "  (baseline " << f.baseline_name << ": " << num(*f.baseline) << " " << f.unit
         << ", ratio " << num(*f.baseline != 0 ? f.value / *f.baseline : 0) << ")";
    os << "  [median of " << f.reps << "]";
    for (auto& [k, v] : f.extra)
      os << " " << k << "=" << num(v);
    for (auto& [k, v] : f.notes)
      os << " " << k << "=" << v;
  }
  std::cout << os.str() << std::endl;
}

double median(std::vector<double> xs) {
  if (xs.empty())
    return 0;
  std::sort(xs.begin(), xs.end());
  auto n = xs.size();
  return n % 2 ? xs[n / 2] : (xs[n / 2 - 1] + xs[n / 2]) / 2;
}

double percentile(std::vector<double> xs, double p) {
  if (xs.empty())
    return 0;
  std::sort(xs.begin(), xs.end());
  auto rank = static_cast<size_t>(std::ceil(p / 100.0 * xs.size()));
  return xs[std::clamp<size_t>(rank, 1, xs.size()) - 1];
}

}  // namespace kvferry::bench
