// What a launcher run with a verified 1P1D workload (instances prefill-0 and
// decode-0) must print at its end: shared by the tests that launch one.
#pragma once

#include <cstdint>
#include <regex>
#include <string>

#include <catch2/catch.hpp>

namespace kvferry::test {

/// Checks the workload's report in a launcher's output: every room Success
/// on every decode rank (one line per instance per-node, per rank per-rank),
/// verified, no disagreement.
inline void check_every_room(const std::string& out, uint32_t requests) {
  std::regex re{
      R"(decode-0(?:/\d+)? decode: (\d+) requests on \d+ ranks?, (\d+) Success, (\d+) Failed, (\d+) verified byte for byte, (\d+) corrupted, (\d+) disagreements)"};
  size_t lines = 0;
  for (auto i = std::sregex_iterator(out.begin(), out.end(), re); i != std::sregex_iterator();
       ++i, ++lines) {
    auto& m = *i;
    INFO(m[0]);
    CHECK(std::stoul(m[1]) == requests);
    CHECK(std::stoul(m[2]) == requests);
    CHECK(std::stoul(m[3]) == 0u);
    CHECK(std::stoul(m[4]) == requests);
    CHECK(std::stoul(m[5]) == 0u);
    CHECK(std::stoul(m[6]) == 0u);
  }
  CHECK(lines >= 1u);
  CHECK_THAT(out, Catch::Contains("2 nodes, 0 failed"));
}

}  // namespace kvferry::test
