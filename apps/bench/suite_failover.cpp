#include "apps/bench/suite_failover.hpp"

#include <climits>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <unistd.h>

#include "actors/common/deadlines.hpp"
#include "apps/bench/bench_report.hpp"
#include "apps/common/failover_run.hpp"

namespace kvferry::bench {

namespace {

/// kvferry-demo, next to this binary's folder (build/apps/).
std::string demo_path() {
  return (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "kvferry-demo").string();
}

/// What the trials of one kind measured.
struct measured {
  std::vector<double> strike_ms;     ///< strike to every struck room concluded, per trial
  std::vector<double> fail_fast_ms;  ///< per room opened to the dead instance
  std::vector<double> restart_ms;    ///< restart to the first room that succeeded again
};

/// `n` trials with `signal`; a trial whose survivors disagree makes the
/// suite fail. With `restart`, the struck rank's process is started again
/// right after the strike (kills only).
measured trials(int n, int signal, bool restart, bool& agreed, uint32_t hold_mib = 0) {
  measured m;
  auto& ms = m.strike_ms;
  // n trials that struck a live room: a strike between two rooms measures
  // nothing, and is tried again (up to 3n trials in all).
  for (int i = 0; i < 3 * n && static_cast<int>(ms.size()) < n; ++i) {
    apps::failover_options o;
    o.demo = demo_path();
    o.signal = signal;
    o.hold_mib = hold_mib;
    if (auto* level = std::getenv("KVFERRY_BENCH_LOG"))
      o.log_level = level;         // the processes' logs go to KVFERRY_BENCH_TRACE's output
    o.rooms = restart ? 200 : 60;  // rooms left for the restarted rank to serve
    o.restart = restart;
    auto r = apps::run_failover(o);
    if (!r.error.empty())
      throw std::runtime_error(r.error);
    // Rooms live at the strike by their real opening: the decode scheduler
    // runs behind its pacing, and a room it opened after the strike is a
    // fail-fast room (measured below), not a struck one. Only rooms the
    // strike failed: one that had all its bytes succeeds a moment after it.
    if (r.struck(true, true).empty()) {
      std::cerr << "kvferry-bench failover: no room live at the strike failed; trial skipped\n";
      continue;
    }
    for (auto& d : r.disagreements()) {
      std::cerr << "kvferry-bench failover: disagreement: " << d << "\n";
      agreed = false;
    }
    ms.push_back(r.strike_to_all_concluded_ms(true, true));
    // Rooms opened once the survivors know (100 ms after the strike), and
    // before any restart: they need a dead instance.
    auto known = r.strike_ns + 100'000'000;
    auto until = r.restarted_ns != 0 ? r.restarted_ns : INT64_MAX;
    if (signal == SIGKILL)
      for (auto f : r.fail_fast_ms(known, until))
        m.fail_fast_ms.push_back(f);
    if (std::getenv("KVFERRY_BENCH_TRACE") && std::getenv("KVFERRY_BENCH_LOG"))
      for (auto& out : r.outputs)
        std::cerr << "trace output:\n" << out << "\n";
    if (std::getenv("KVFERRY_BENCH_TRACE"))
      for (auto& [room, cs] : r.rooms)
        for (auto& c : cs)
          std::cerr << "trace room " << room << " opened+"
                    << (r.opened_at(room) - r.strike_ns) / 1e6 << "ms " << c.rank << " " << c.state
                    << " +" << (c.at_ns - r.opened_at(room)) / 1e6 << "ms " << c.why << "\n";
    if (r.restarted_ns != 0) {
      auto back = r.first_success_after_ms(r.restarted_ns, 4);  // decode x2, prefill x2
      if (back >= 0)
        m.restart_ms.push_back(back);
      else
        std::cerr << "kvferry-bench failover: no room succeeded after the restart\n";
    }
  }
  return m;
}

}  // namespace

int run_failover_suite(const args& a) {
  int kills = static_cast<int>(a.get("kills", uint64_t{a.has("quick") ? 3u : 20u}));
  int stops = static_cast<int>(a.get("stops", uint64_t{a.has("quick") ? 2u : 5u}));
  int restarts = static_cast<int>(a.get("restarts", uint64_t{a.has("quick") ? 2u : 5u}));
  bool agreed = true;
  auto silence = std::chrono::duration<double, std::milli>(deadlines{}.silence()).count();
  // One figure of `ms` (strike to all concluded, per trial) at percentile `p`.
  auto report = [&](const std::string& metric, const std::vector<double>& ms, double p) {
    figure f;
    f.suite = "failover";
    f.metric = metric;
    f.value = percentile(ms, p);
    f.unit = "ms";
    f.baseline = silence;
    f.baseline_name = "heartbeat silence (interval x misses)";
    f.reps = static_cast<int>(ms.size());
    f.extra["p50"] = percentile(ms, 50);
    f.extra["p99"] = percentile(ms, 99);
    f.extra["max"] = percentile(ms, 100);
    print(f, a.json);
  };
  auto killed = trials(kills, SIGKILL, false, agreed);
  if (!killed.strike_ms.empty()) {
    report("kill_to_all_failed_p50_ms", killed.strike_ms, 50);
    report("kill_to_all_failed_p99_ms", killed.strike_ms, 99);
  }
  if (!killed.fail_fast_ms.empty())
    report("dead_instance_fail_fast_p99_ms", killed.fail_fast_ms, 99);
  // The same kills, the struck process holding 4 GiB of 4 KiB pages beside
  // its pools: its sockets close only after the kernel tore that down (about
  // 0.36 s here), its life token at once.
  int big = static_cast<int>(a.get("kills-4gib", uint64_t{a.has("quick") ? 1u : 5u}));
  auto held = trials(big, SIGKILL, false, agreed, 4096);
  if (!held.strike_ms.empty())
    report("kill_to_all_failed_4gib_p99_ms", held.strike_ms, 99);
  auto stopped = trials(stops, SIGSTOP, false, agreed);
  if (!stopped.strike_ms.empty())
    report("partition_to_all_failed_p99_ms", stopped.strike_ms, 99);
  auto restarted = trials(restarts, SIGKILL, true, agreed);
  if (!restarted.restart_ms.empty())
    report("restart_to_first_success_ms", restarted.restart_ms, 50);
  return agreed ? 0 : 1;
}

}  // namespace kvferry::bench
