// The fault matrix through the real launcher (issue 28): every role (a
// prefill rank, a decode rank, the node that hosts a prefill instance's
// bootstrap, the node that hosts a decode instance's decider) x every fault
// (kill -9, SIGSTOP then SIGCONT 3 s later, and a prefill and a decode rank
// killed at once) x every topology (equal TP with two prefill instances,
// fan-in 4 -> 2 with staging, fan-out 2 -> 4 with staging, DP attention:
// TP 4 in 2 groups -> TP 2 in 2 groups, the last group struck), one process per
// rank, restarts on, a paced workload. Each case checks that:
//   - the run ends by itself;
//   - every room concluded alike on every rank that took part (a prefill
//     rank that no decode rank asked concludes Failed alone, and only that);
//   - no byte was corrupted;
//   - the rooms of the parts that were not hit all succeed (the other prefill
//     instance's rooms, where one is hit);
//   - the cluster serves again: every instance has a Success after the
//     fault healed (the restart came up, or SIGCONT), printed as a bound, and
//     every room due 3 s after that succeeds.
// A table of cases against outcomes is printed at the end. The default run
// takes a few cases (KVFERRY_MATRIX=default); the soak label runs them all
// (KVFERRY_MATRIX=all); KVFERRY_MATRIX=NAME,NAME picks cases by name.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "apps/common/child_process.hpp"
#include "tests/support/free_port.hpp"
#include "tests/support/process_probe.hpp"
#include "tests/support/workload_report.hpp"

using namespace kvferry::apps;
using kvferry::test::conclusion;
using kvferry::test::conclusions_in;
using kvferry::test::free_port;
using kvferry::test::pids_with;
using namespace std::chrono_literals;

namespace {

const std::string launcher = KVFERRY_LAUNCH_PATH;

int64_t wall() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct topology {
  std::string name;
  std::vector<uint32_t> prefill_tp;  ///< one entry per prefill instance
  uint32_t decode_tp = 2;
  bool staging = false;
  /// DP attention groups of prefill-0 and of decode-0 (1: none). The fault
  /// strikes the last group ("prefill-0/dp1"); the other groups' rooms are
  /// the parts not hit.
  uint32_t prefill_dp = 1;
  uint32_t decode_dp = 1;

  /// The instance (DP group) the fault strikes on each side.
  std::string struck_prefill() const {
    return prefill_dp > 1 ? "prefill-0/dp" + std::to_string(prefill_dp - 1) : "prefill-0";
  }
  std::string struck_decode() const {
    return decode_dp > 1 ? "decode-0/dp" + std::to_string(decode_dp - 1) : "decode-0";
  }
  /// Instances the runtime sees: every DP group counts.
  size_t instances() const { return (prefill_tp.size() - 1) + prefill_dp + decode_dp; }
};

enum class role { prefill_rank, decode_rank, prefill_node, decode_node, prefill_and_decode_rank };
enum class fault { kill, stop };

struct matrix_case {
  topology topo;
  role who;
  fault what;

  std::string name() const {
    static const char* roles[] = {"prefill-rank", "decode-rank", "bootstrap-node", "decider-node",
                                  "prefill+decode-rank"};
    return topo.name + "/" + roles[static_cast<int>(who)] + "/" +
           (what == fault::kill ? "kill" : "stop");
  }
};

constexpr uint32_t per_second = 40;
constexpr uint32_t seconds = 16;
constexpr int64_t fault_after_ns = 4'000'000'000;  // into the workload
constexpr int64_t stop_for_ns = 3'000'000'000;     // SIGSTOP until SIGCONT
constexpr int64_t settle_ns = 3'000'000'000;       // after the heal, every room succeeds

std::string cluster_file(const topology& t) {
  std::ostringstream f;
  f << "transport = \"auto\"\nprocesses = \"per-rank\"\nrestart = \"on-failure\"\n"
    << "restart_backoff = \"200ms\"\nrestart_limit = 20\n\n"
    << "[deadlines]\nbootstrap = \"5s\"\ntransfer = \"10s\"\n\n"
    << "[heartbeat]\ninterval = \"200ms\"\nmisses = 5\n\n";
  if (t.staging)
    f << "[staging]\nenabled = true\nring_mib = 16\ngather_mib = 16\n\n";
  f << "[workload]\nrequests = " << per_second * seconds << "\nrequests_per_second = " << per_second
    << "\nmin_tokens = 16\nmax_tokens = 96\npage_size = 16\npool_pages = 96\n"
    << "model = \"tiny\"\nprogress = \"5s\"\n\n";
  for (size_t i = 0; i < t.prefill_tp.size(); ++i)
    f << "[[node]]\nname = \"prefill-node-" << i
      << "\"\nhost = \"127.0.0.1\"\nstatus_port = " << free_port() << "\n\n";
  f << "[[node]]\nname = \"decode-node\"\nhost = \"127.0.0.1\"\nstatus_port = " << free_port()
    << "\n\n";
  std::string prefills;
  for (size_t i = 0; i < t.prefill_tp.size(); ++i) {
    f << "[[instance]]\nname = \"prefill-" << i << "\"\nrole = \"prefill\"\nnode = \"prefill-node-"
      << i << "\"\ntp = " << t.prefill_tp[i] << "\nbootstrap_port = " << free_port() << "\n";
    if (i == 0 && t.prefill_dp > 1)
      f << "dp = " << t.prefill_dp << "\n";
    f << "\n";
    prefills += (i ? ", " : "") + std::string{"\"prefill-"} + std::to_string(i) + "\"";
  }
  f << "[[instance]]\nname = \"decode-0\"\nrole = \"decode\"\nnode = \"decode-node\"\ntp = "
    << t.decode_tp << "\nprefill = [" << prefills << "]\n";
  if (t.decode_dp > 1)
    f << "dp = " << t.decode_dp << "\n";
  return f.str();
}

struct outcome {
  std::string name;
  bool ended = false;
  uint32_t rooms = 0, success = 0, failed = 0, disagreements = 0, corrupted_reports = 0;
  uint32_t spared = 0, spared_failed = 0;  ///< rooms of parts not hit
  bool spares = false;  ///< the topology has parts the fault cannot reach (their rooms count)
  uint32_t late = 0, late_failed = 0;  ///< rooms due after heal + settle
  double serve_again_ms = -1;          ///< heal to a Success on every instance
  std::vector<std::string> notes;

  bool ok() const {
    return ended && disagreements == 0 && corrupted_reports == 0 && spared_failed == 0 &&
           late_failed == 0 && late > 0 && serve_again_ms >= 0;
  }
};

/// Reads what `run` prints for `d`.
void pump_for(child_process& run, std::chrono::milliseconds d) {
  run.wait_for_line([](const std::string&) { return false; }, d);
}

/// The pid of the first process whose command line holds `needle`.
int victim(const std::string& needle) {
  auto pids = pids_with(needle);
  return pids.empty() ? -1 : pids.front();
}

/// Waits (pumping) for a line holding `marker` printed after offset `from`;
/// the wall time it was seen, or -1.
int64_t seen_after(child_process& run, size_t from, const std::string& marker,
                   std::chrono::seconds limit) {
  auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (run.output().find(marker, from) != std::string::npos)
      return wall();
    pump_for(run, 20ms);
  }
  return -1;
}

outcome run_case(const matrix_case& mc) {
  outcome o;
  o.name = mc.name();
  char name[] = "/tmp/kvferry-matrix-XXXXXX.toml";
  int fd = ::mkstemps(name, 5);
  REQUIRE(fd >= 0);
  ::close(fd);
  std::ofstream{name} << cluster_file(mc.topo);
  std::string path = name;
  int64_t epoch = wall() + 10'000'000'000;
  child_process run{{launcher, "--cluster=" + path, "--local", "--print-conclusions",
                     "--epoch-ns=" + std::to_string(epoch),
                     "--local-timeout=" + std::to_string(seconds + 100)}};
  while (wall() < epoch + fault_after_ns)
    pump_for(run, 50ms);

  // The fault, and when it healed.
  auto last_prefill = mc.topo.prefill_tp.front() / mc.topo.prefill_dp - 1;
  auto last_decode = mc.topo.decode_tp / mc.topo.decode_dp - 1;
  auto prefill_rank = mc.topo.struck_prefill() + "/" + std::to_string(last_prefill);
  auto decode_rank = mc.topo.struck_decode() + "/" + std::to_string(last_decode);
  std::vector<std::pair<std::string, std::string>> targets;  // (pattern, the line once back)
  switch (mc.who) {
    case role::prefill_rank:
      targets.push_back({"--rank=" + prefill_rank + " ", "rank " + prefill_rank + " up on"});
      break;
    case role::decode_rank:
      targets.push_back({"--rank=" + decode_rank + " ", "rank " + decode_rank + " up on"});
      break;
    case role::prefill_node:
      targets.push_back({"--node=prefill-node-0 --kvferry", "rank " + prefill_rank + " up on"});
      break;
    case role::decode_node:
      targets.push_back({"--node=decode-node --kvferry", "rank " + decode_rank + " up on"});
      break;
    case role::prefill_and_decode_rank:
      targets.push_back({"--rank=" + prefill_rank + " ", "rank " + prefill_rank + " up on"});
      targets.push_back({"--rank=" + decode_rank + " ", "rank " + decode_rank + " up on"});
      break;
  }
  std::vector<int> pids;
  for (auto& t : targets) {
    auto pid = victim(t.first);
    REQUIRE(pid > 0);
    pids.push_back(pid);
  }
  auto struck_at = run.output().size();
  int64_t struck_ns = wall();
  for (auto pid : pids)
    ::kill(pid, mc.what == fault::kill ? SIGKILL : SIGSTOP);
  int64_t healed_ns = -1;
  if (mc.what == fault::stop) {
    while (wall() < struck_ns + stop_for_ns)
      pump_for(run, 50ms);
    for (auto pid : pids)
      ::kill(pid, SIGCONT);
    healed_ns = wall();
  } else {
    for (auto& t : targets)
      healed_ns = std::max(healed_ns, seen_after(run, struck_at, t.second, 30s));
  }
  int rc = run.wait(std::chrono::seconds{seconds + 120});
  auto out = run.output();
  ::unlink(path.c_str());
  std::ofstream{"/tmp/kvferry-matrix-" + std::to_string(::getpid()) + "-last.log"} << out;
  o.ended = rc >= 0;
  if (healed_ns < 0) {
    o.notes.push_back("the struck part never came back");
    return o;
  }

  // Every rank's conclusion of every room.
  auto rooms = conclusions_in(out);
  std::istringstream in{out};
  for (std::string line; std::getline(in, line);) {
    if (line.find(" corrupted") != std::string::npos &&
        line.find(", 0 corrupted") == std::string::npos)
      ++o.corrupted_reports;
  }
  o.rooms = static_cast<uint32_t>(rooms.size());
  bool prefill_hit_only = mc.who == role::prefill_rank || mc.who == role::prefill_node;
  // A decode rank of one DP group struck: the other groups are not hit.
  bool decode_group_hit = mc.who == role::decode_rank && mc.topo.decode_dp > 1;
  o.spares =
      decode_group_hit || (prefill_hit_only && mc.topo.prefill_tp.size() + mc.topo.prefill_dp > 2);
  std::map<std::string, int64_t> first_success;  // instance -> after the heal
  for (auto& [room, cs] : rooms) {
    const conclusion* ref = nullptr;
    for (auto& c : cs)
      if (c.rank.rfind("decode-", 0) == 0)
        ref = &c;
    if (!ref)
      continue;  // only prefill ranks concluded it (decode's record went with a killed rank)
    ++(ref->state == "Success" ? o.success : o.failed);
    std::set<std::string> prefills;
    for (auto& c : cs) {
      if (c.rank.rfind("prefill-", 0) == 0)
        prefills.insert(c.instance());
      if ((c.state == ref->state && c.why == ref->why) || kvferry::test::concluded_alone(c))
        continue;
      if (++o.disagreements <= 5)
        o.notes.push_back("room " + std::to_string(room) + ": " + c.rank + " " + c.state + " " +
                          c.why + " vs " + ref->rank + " " + ref->state + " " + ref->why);
    }
    // A room of a prefill instance (or DP group) that was not hit, or of a
    // decode DP group that was not.
    bool spared =
        (prefill_hit_only && !prefills.empty() && !prefills.count(mc.topo.struck_prefill())) ||
        (decode_group_hit && ref->instance() != mc.topo.struck_decode());
    if (spared) {
      ++o.spared;
      if (ref->state != "Success") {
        if (++o.spared_failed <= 5)
          o.notes.push_back("room " + std::to_string(room) + " of a part not hit: " + ref->why);
      }
    }
    auto due = epoch + static_cast<int64_t>(room - 1) * (1'000'000'000 / per_second);
    if (due >= healed_ns + settle_ns) {
      ++o.late;
      if (ref->state != "Success" && ++o.late_failed <= 5)
        o.notes.push_back("room " + std::to_string(room) +
                          " due after the heal failed: " + ref->why);
    }
    bool everywhere =
        std::all_of(cs.begin(), cs.end(), [](auto& c) { return c.state == "Success"; });
    if (everywhere && due >= healed_ns)
      for (auto& c : cs) {
        auto& t = first_success[c.instance()];
        t = t == 0 ? c.at_ns : std::min(t, c.at_ns);
      }
  }
  int64_t serve_again = 0;
  size_t instances = mc.topo.instances();
  if (first_success.size() == instances) {
    for (auto& [inst, t] : first_success)
      serve_again = std::max(serve_again, t - healed_ns);
    o.serve_again_ms = serve_again / 1e6;
  } else {
    o.notes.push_back("no Success after the heal on " +
                      std::to_string(instances - first_success.size()) + " instance(s)");
  }
  return o;
}

std::vector<matrix_case> every_case() {
  std::vector<topology> topos{{"equal-2p", {2, 2}, 2, false},
                              {"fan-in-4to2", {4}, 2, true},
                              {"fan-out-2to4", {2}, 4, true},
                              // DP attention: prefill TP 4 in 2 groups of 2, decode TP 2
                              // in 2 groups of 1 (fan-in 2 -> 1 inside the groups).
                              {"dp-4x2to2x2", {4}, 2, true, 2, 2}};
  std::vector<matrix_case> out;
  for (auto& t : topos) {
    for (auto who : {role::prefill_rank, role::decode_rank, role::prefill_node, role::decode_node})
      for (auto what : {fault::kill, fault::stop})
        out.push_back({t, who, what});
    out.push_back({t, role::prefill_and_decode_rank, fault::kill});
  }
  return out;
}

std::vector<matrix_case> chosen() {
  auto all = every_case();
  auto* env = std::getenv("KVFERRY_MATRIX");
  std::string pick = env ? env : "default";
  if (pick == "all")
    return all;
  std::set<std::string> names;
  if (pick == "default")
    names = {"equal-2p/decode-rank/kill", "fan-in-4to2/prefill-rank/kill",
             "fan-out-2to4/decode-rank/kill", "dp-4x2to2x2/decode-rank/kill"};
  else {
    std::istringstream in{pick};
    std::string n;
    while (std::getline(in, n, ','))
      names.insert(n);
  }
  std::vector<matrix_case> out;
  for (auto& c : all)
    if (names.count(c.name()))
      out.push_back(c);
  return out;
}

}  // namespace

TEST_CASE("fault matrix: every role x fault x topology through the launcher",
          "[launch][process][matrix]") {
  auto cases = chosen();
  REQUIRE(!cases.empty());
  std::vector<outcome> done;
  for (auto& mc : cases) {
    std::fprintf(stderr, "matrix: %s ...\n", mc.name().c_str());
    done.push_back(run_case(mc));
  }
  std::ostringstream table;
  table << "\n"
        << "| case | ended | rooms | Success | Failed | disagree | corrupted | spared ok | after "
           "heal ok | serves again (ms) |\n|---|---|---|---|---|---|---|---|---|---|\n";
  for (auto& o : done) {
    table << "| " << o.name << " | " << (o.ended ? "yes" : "NO") << " | " << o.rooms << " | "
          << o.success << " | " << o.failed << " | " << o.disagreements << " | "
          << o.corrupted_reports << " | " << (o.spared - o.spared_failed) << "/" << o.spared
          << " | " << (o.late - o.late_failed) << "/" << o.late << " | ";
    if (o.serve_again_ms >= 0)
      table << static_cast<long>(o.serve_again_ms);
    else
      table << "never";
    table << " |\n";
  }
  std::fprintf(stderr, "%s\n", table.str().c_str());
  for (auto& o : done) {
    INFO(o.name);
    for (auto& n : o.notes)
      INFO(n);
    CHECK(o.ended);
    CHECK(o.disagreements == 0u);
    CHECK(o.corrupted_reports == 0u);
    CHECK(o.spared_failed == 0u);
    if (o.spares)
      CHECK(o.spared > 0u);
    CHECK(o.late > 0u);
    CHECK(o.late_failed == 0u);
    CHECK(o.serve_again_ms >= 0);
  }
}
