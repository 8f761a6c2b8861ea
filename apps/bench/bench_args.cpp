#include "apps/bench/bench_args.hpp"

#include <stdexcept>

namespace kvferry::bench {

uint64_t args::get(const std::string& key, uint64_t fallback) const {
  auto i = options.find(key);
  if (i == options.end())
    return fallback;
  try {
    size_t used = 0;
    auto v = std::stoull(i->second, &used);
    if (used != i->second.size())
      throw std::invalid_argument(key);
    return v;
  } catch (const std::exception&) {
    throw std::invalid_argument("--" + key + "=" + i->second + ": expected an unsigned integer");
  }
}

std::string args::get(const std::string& key, const std::string& fallback) const {
  auto i = options.find(key);
  return i == options.end() ? fallback : i->second;
}

args parse_args(int argc, char** argv) {
  args a;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    if (s == "--json") {
      a.json = true;
    } else if (s.rfind("--", 0) == 0) {
      auto eq = s.find('=');
      auto key = s.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      auto value = eq == std::string::npos ? std::string(1, '1') : s.substr(eq + 1);
      a.options.insert_or_assign(std::move(key), std::move(value));
    } else if (a.suite.empty()) {
      a.suite = s;
    } else {
      throw std::invalid_argument("unexpected argument '" + s + "'");
    }
  }
  return a;
}

}  // namespace kvferry::bench
