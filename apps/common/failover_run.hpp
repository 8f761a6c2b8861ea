// One failover trial with real processes on 127.0.0.1, as the failover test
// and `kvferry-bench failover` run it: a prefill instance of TP 2 with one
// process per rank (the first hosts the bootstrap), a decode instance of TP 2
// in a third process (its decider and both ranks), requests paced on a clock
// the processes share. Mid-run one prefill rank process is killed (SIGKILL)
// or frozen (SIGSTOP: no connection drops); optionally a new process takes
// its place. The survivors print when each rank concluded each room; the
// trial reads them back and reports what every surviving rank concluded.
#pragma once

#include <chrono>
#include <csignal>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kvferry::apps {

struct failover_options {
  std::string demo;  ///< path of kvferry-demo
  std::string model = "llama-7b";
  int signal = SIGKILL;  ///< SIGKILL (kill -9) or SIGSTOP (a silent partition)
  bool restart = false;  ///< start a new process for the lost rank right after
  uint32_t rooms = 80;
  uint32_t interval_us = 25000;
  std::chrono::milliseconds lead{4000};         ///< from start to the first room
  std::chrono::milliseconds strike_after{600};  ///< from the first room to the fault
  std::vector<std::string> extra;               ///< more options for every process
};

/// One rank's conclusion of one room, read from a process's output.
struct rank_conclusion {
  std::string rank;  ///< "decode-0 tp1 pp0"
  std::string state;
  int64_t at_ns = 0;
  std::string why;  ///< "-" for Success
};

struct failover_result {
  int64_t strike_ns = 0;  ///< when the signal was sent (system clock)
  int64_t epoch_ns = 0;   ///< when room 1 opened
  int64_t interval_ns = 0;

  /// When room `room` opened on every process (paced arrivals).
  int64_t opened_ns(uint64_t room) const {
    return epoch_ns + static_cast<int64_t>(room - 1) * interval_ns;
  }
  /// Every surviving rank's conclusions, by room.
  std::map<uint64_t, std::vector<rank_conclusion>> rooms;
  std::vector<std::string> outputs;  ///< each process's output, for diagnostics
  std::string error;                 ///< set when the trial itself could not run

  /// Rooms that were live at the strike: opened before it, concluded after.
  std::vector<uint64_t> struck() const;
  /// From the strike to the last survivor's conclusion of a struck room, ms.
  double strike_to_all_concluded_ms() const;
  /// A struck room whose survivors did not all conclude the same: Success
  /// (its bytes had all landed before the strike), or Failed with one cause;
  /// a prefill rank that concluded alone (no decode rank reached it for the
  /// room) only has to conclude Failed.
  std::vector<std::string> disagreements() const;
  /// Rooms that every one of `ranks` ranks concluded Success, among those
  /// opened after `after_ns`.
  uint32_t successes_after(int64_t after_ns, size_t ranks) const;
};

failover_result run_failover(const failover_options& o);

}  // namespace kvferry::apps
