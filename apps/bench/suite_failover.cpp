#include "apps/bench/suite_failover.hpp"

#include <csignal>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <unistd.h>

#include "actors/rank/deadlines.hpp"
#include "apps/bench/bench_report.hpp"
#include "apps/common/failover_run.hpp"

namespace kvferry::bench {

namespace {

/// kvferry-demo, next to this binary's folder (build/apps/).
std::string demo_path() {
  return (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "kvferry-demo").string();
}

/// Strike-to-all-concluded times of `n` trials with `signal`; a trial whose
/// survivors disagree aborts the suite.
std::vector<double> trials(int n, int signal, bool& agreed) {
  std::vector<double> ms;
  for (int i = 0; i < n; ++i) {
    apps::failover_options o;
    o.demo = demo_path();
    o.signal = signal;
    o.rooms = 60;
    auto r = apps::run_failover(o);
    if (!r.error.empty())
      throw std::runtime_error(r.error);
    if (r.struck().empty()) {
      std::cerr << "kvferry-bench failover: no room was live at the strike; trial skipped\n";
      continue;
    }
    for (auto& d : r.disagreements()) {
      std::cerr << "kvferry-bench failover: disagreement: " << d << "\n";
      agreed = false;
    }
    ms.push_back(r.strike_to_all_concluded_ms());
  }
  return ms;
}

}  // namespace

int run_failover_suite(const args& a) {
  int kills = static_cast<int>(a.get("kills", uint64_t{a.has("quick") ? 3u : 10u}));
  int stops = static_cast<int>(a.get("stops", uint64_t{a.has("quick") ? 2u : 5u}));
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
  auto killed = trials(kills, SIGKILL, agreed);
  if (!killed.empty()) {
    report("kill_to_all_failed_p50_ms", killed, 50);
    report("kill_to_all_failed_p99_ms", killed, 99);
  }
  auto stopped = trials(stops, SIGSTOP, agreed);
  if (!stopped.empty())
    report("partition_to_all_failed_p99_ms", stopped, 99);
  return agreed ? 0 : 1;
}

}  // namespace kvferry::bench
