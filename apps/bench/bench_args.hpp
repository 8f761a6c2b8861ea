// kvferry-bench's command line: SUITE, --json, and --key=value options.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace kvferry::bench {

struct args {
  std::string suite;  ///< first positional argument
  bool json = false;
  std::map<std::string, std::string> options;  ///< --key=value

  uint64_t get(const std::string& key, uint64_t fallback) const;
  std::string get(const std::string& key, const std::string& fallback) const;
  bool has(const std::string& key) const { return options.count(key) > 0; }
};

/// Parses argv; throws std::invalid_argument naming a malformed argument.
args parse_args(int argc, char** argv);

}  // namespace kvferry::bench
