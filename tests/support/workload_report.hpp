// What a launcher run with a verified 1P1D workload (instances prefill-0 and
// decode-0) must print at its end: shared by the tests that launch one.
#pragma once

#include <cstdint>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace kvferry::test {

/// One rank's conclusion of one room, as --print-conclusions prints it.
struct conclusion {
  std::string rank;  ///< "decode-0 tp1 pp0"
  std::string state;
  int64_t at_ns = 0;
  std::string why;

  std::string instance() const { return rank.substr(0, rank.find(' ')); }
};

/// A prefill rank that no decode rank reached for the room concludes Failed
/// alone, with its own cause (its Bootstrapping deadline): the one exemption
/// from "every rank alike" (docs/ARCHITECTURE.md §8). Its sibling that a
/// decode rank did reach concludes with the decider's verdict.
inline bool concluded_alone(const conclusion& c) {
  return c.state == "Failed" && (c.why.find("no decode rank asked for it") != std::string::npos ||
                                 c.why.find("was requested but not opened") != std::string::npos ||
                                 c.why.find("stayed in Bootstrapping") != std::string::npos);
}

/// Room -> every rank's conclusion, from the whole lines of `out` that are a
/// conclusion: "conclusion RANK room N STATE AT WHY", after any number of
/// relay prefixes ("[node] "). Anchored at both ends of the line, so a line
/// that another writer's bytes got into (issue 30) is not read as one.
inline std::map<uint64_t, std::vector<conclusion>> conclusions_in(const std::string& out) {
  static const std::regex re{
      R"(^(?:\[[^\]]+\] )*conclusion (\S+ tp\d+ pp\d+) room (\d+) (\w+) (\d+) (.*)$)"};
  std::map<uint64_t, std::vector<conclusion>> rooms;
  std::istringstream in{out};
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_match(line, m, re))
      rooms[std::stoull(m[2])].push_back({m[1], m[3], std::stoll(m[4]), m[5]});
  }
  return rooms;
}

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
