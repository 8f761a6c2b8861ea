// A whole instance killed (kill -9 of every process of it) mid-run and started
// again on the same bootstrap address while the other instance keeps running,
// TP 2 -> 2 on 127.0.0.1: the surviving ranks conclude the rooms the dead
// incarnation was in Failed, with one cause, the new incarnation comes back
// under the same name with a newer generation, and the rooms it serves
// succeed on every rank of both instances, byte for byte (the decode process
// checks each Success).
#include <catch2/catch.hpp>

#include <algorithm>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "apps/common/failover_run.hpp"

using namespace kvferry::apps;

namespace {

/// The figures of one side's report ("decode: 160 requests on 2 ranks, 142
/// Success, 0 Failed, 18 skipped (...), 142 verified byte for byte, 0
/// corrupted, 0 disagreements").
struct side_report {
  uint32_t success = 0;
  uint32_t failed = 0;
  uint32_t verified = 0;
  uint32_t corrupted = 0;
  uint32_t disagreements = 0;
};

std::optional<side_report> report_of(const std::string& out, const std::string& side) {
  std::regex line{"(^|\\n)" + side +
                  R"(: \d+ requests on \d+ ranks?, (\d+) Success, (\d+) Failed)"
                  R"((, \d+ skipped[^,]*)?(, (\d+) verified byte for byte, (\d+) corrupted)?)"
                  R"(, (\d+) disagreements)"};
  std::smatch m;
  if (!std::regex_search(out, m, line))
    return std::nullopt;
  auto num = [&](size_t i) { return m[i].matched ? static_cast<uint32_t>(std::stoul(m[i])) : 0u; };
  return side_report{num(2), num(3), num(6), num(7), num(8)};
}

/// "<instance> restarted: generation NEW replaced generation OLD": what a
/// rank logs (warn) when it meets a new incarnation of a peer instance.
struct generation_change {
  uint64_t newer = 0;
  uint64_t older = 0;
};

std::vector<generation_change> generation_changes(const std::vector<std::string>& outs,
                                                  const std::string& instance) {
  std::vector<generation_change> got;
  std::regex re{instance + R"( restarted: generation (\d+) replaced generation (\d+))"};
  for (auto& out : outs)
    for (auto i = std::sregex_iterator(out.begin(), out.end(), re); i != std::sregex_iterator();
         ++i)
      got.push_back({std::stoull((*i)[1]), std::stoull((*i)[2])});
  return got;
}

/// Every output, cut short, for a failing check's message.
std::string outputs_of(const failover_result& r) {
  std::string s;
  for (auto& out : r.outputs)
    s += out.substr(0, 6000) + "\n----\n";
  return s;
}

/// What the two surviving ranks concluded of the rooms that were live at the
/// kill (opened before it, concluded after it). The struck instance's new
/// processes skip those rooms (their time passed before they started), so
/// only the survivors conclude them. A room the dead incarnation was in fails
/// on both; a room whose verdict was out before the kill may still succeed
/// on both; a prefill room that no decode rank had asked for yet did not
/// involve the dead decode instance and concludes Failed alone.
struct struck_rooms {
  uint32_t failed = 0;           ///< rooms the dead incarnation was in
  std::set<std::string> causes;  ///< the causes they failed with
  std::vector<std::string> odd;  ///< a room concluded in none of those ways
};

struck_rooms struck_of(const failover_result& r, const std::string& survivor) {
  struck_rooms s;
  for (auto room : r.struck()) {
    auto& cs = r.rooms.at(room);
    auto name = "room " + std::to_string(room) + ": ";
    auto all = [&](auto pred) { return std::all_of(cs.begin(), cs.end(), pred); };
    if (cs.size() != 2 || !all([&](auto& c) { return c.rank.rfind(survivor + " ", 0) == 0; })) {
      s.odd.push_back(name + std::to_string(cs.size()) + " conclusions, not " + survivor + "'s 2");
      continue;
    }
    if (all([](auto& c) { return c.state == "Success"; }) || all(concluded_alone))
      continue;
    if (!all([&](auto& c) { return c.state == "Failed" && c.why == cs.front().why; })) {
      s.odd.push_back(name + cs[0].rank + " " + cs[0].state + " " + cs[0].why + " / " + cs[1].rank +
                      " " + cs[1].state + " " + cs[1].why);
      continue;
    }
    ++s.failed;
    s.causes.insert(cs.front().why);
  }
  return s;
}

/// The rooms opened after the new incarnation was started, from the first
/// that all four ranks concluded Success on (the first it serves): those that
/// did not succeed on all four, and how many did.
std::pair<std::vector<uint64_t>, uint32_t> served_after_restart(const failover_result& r) {
  auto all_success = [](const std::vector<rank_conclusion>& cs) {
    return cs.size() == 4 &&
           std::all_of(cs.begin(), cs.end(), [](auto& c) { return c.state == "Success"; });
  };
  std::vector<uint64_t> bad;
  uint32_t good = 0;
  bool serving = false;
  for (auto& [room, cs] : r.rooms) {
    if (r.opened_ns(room) < r.restarted_ns)
      continue;
    serving = serving || all_success(cs);
    if (!serving)
      continue;
    if (all_success(cs))
      ++good;
    else
      bad.push_back(room);
  }
  return {bad, good};
}

failover_options restart_options(fault_target target) {
  failover_options o;
  o.demo = KVFERRY_DEMO_PATH;
  o.target = target;
  o.restart = true;
  o.model = "tiny";
  o.rooms = 160;
  o.interval_us = 50000;
  // Each room waits 150 ms at the prefill ranks for the prefill scheduler to
  // open it: a few rooms are in flight whenever the kill lands.
  o.prefill_lag = std::chrono::milliseconds{150};
  // The rooms opened while the struck instance is down (up to a few dozen)
  // wait for it until their 3 s deadline: the other side keeps enough rooms in
  // flight (a small model keeps their pages few) not to fall behind the paced
  // arrivals that the new incarnation serves.
  o.extra = {"--concurrency=96", "--pool-pages=1536"};
  o.log_level = "warn";  // the ranks log the generations they see replaced
  return o;
}

/// What every case checks once the trial ran; `survivor` is the instance
/// that kept running, `struck` the one killed and restarted.
void check_restart(const failover_result& r, const std::string& survivor,
                   const std::string& struck) {
  INFO(r.error);
  REQUIRE(r.error.empty());
  INFO(outputs_of(r));
  REQUIRE(r.outputs.size() == 3u);  // decode, prefill tp0 + bootstrap, prefill tp1

  // The rooms the dead incarnation was in fail on both survivors, all with
  // one cause; no room of the run has ranks that disagree.
  auto s = struck_of(r, survivor);
  CAPTURE(s.failed, s.causes, s.odd, r.strike_to_all_concluded_ms());
  CHECK(s.odd.empty());
  CHECK(s.failed > 0u);
  CHECK(s.causes.size() == 1u);
  auto disagree = r.disagreements_in_every_room();
  CAPTURE(disagree);
  CHECK(disagree.empty());

  // The survivors met the new incarnation: the same name, a newer generation.
  auto changes = generation_changes(r.outputs, struck);
  REQUIRE(!changes.empty());
  for (auto& g : changes)
    CHECK(g.newer > g.older);

  // From the first room the new incarnation serves on, every room succeeds
  // on all four ranks, and every Success held the right bytes.
  auto [bad, good] = served_after_restart(r);
  CAPTURE(bad, good);
  CHECK(good > 0u);
  CHECK(bad.empty());
  auto rep = report_of(r.outputs[0], "decode");
  REQUIRE(rep);
  CHECK(rep->corrupted == 0u);
  CHECK(rep->verified == rep->success);
  CHECK(rep->disagreements == 0u);
}

}  // namespace

// Decode rank tp1 reaches its source (prefill tp1) through the bootstrap's
// node: when the whole instance dies it gets no down_msg and no rank_left, and
// learns of the loss only from the verdicts ("contact was lost ..."), on which
// it looks the instance up again (forget_cut_off_source in decode_peers.cpp).
TEST_CASE(
    "the whole prefill instance killed and restarted: decode fails its rooms then serves "
    "the new incarnation",
    "[e2e][process][restart]") {
  check_restart(run_failover(restart_options(fault_target::prefill_instance)), "decode-0",
                "prefill-0");
}

TEST_CASE(
    "the whole decode instance killed and restarted: prefill fails its rooms then serves "
    "the new incarnation",
    "[e2e][process][restart]") {
  check_restart(run_failover(restart_options(fault_target::decode_instance)), "prefill-0",
                "decode-0");
}
