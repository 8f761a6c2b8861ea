// One failover trial with real processes on 127.0.0.1, as the failover test
// and `kvferry-bench failover` run it: a prefill instance of TP 2 with one
// process per rank (the first hosts the bootstrap), a decode instance of TP 2
// in a third process (its decider and both ranks), requests paced on a clock
// the processes share. Mid-run one prefill rank process is killed (SIGKILL)
// or frozen (SIGSTOP: no connection drops); optionally a new process takes
// its place. The survivors print when each rank concluded each room; the
// trial reads them back and reports what every surviving rank concluded.
// With `target` the fault strikes a whole instance instead (every process of
// the prefill instance, bootstrap included, or the decode process), and the
// restart brings up a new incarnation of it on the same bootstrap address.
#pragma once

#include <chrono>
#include <csignal>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kvferry::apps {

/// What the fault strikes.
enum class fault_target {
  prefill_rank,      ///< prefill rank 1's process; the bootstrap's process stays
  prefill_instance,  ///< both prefill processes: the bootstrap and every rank
  decode_instance,   ///< the decode process: the decider and every decode rank
};

struct failover_options {
  std::string demo;  ///< path of kvferry-demo
  fault_target target = fault_target::prefill_rank;
  std::string model = "llama-7b";
  int signal = SIGKILL;  ///< SIGKILL (kill -9) or SIGSTOP (a silent partition)
  bool restart = false;  ///< start new processes for what was struck right after
  uint32_t rooms = 80;
  uint32_t interval_us = 25000;
  /// From the moment every process is ready (ranks up) to the first room.
  std::chrono::milliseconds lead{1000};
  /// From the first room to the fault; and the fault waits, besides, for the
  /// decode process to see a room succeed (it prints "first success").
  std::chrono::milliseconds strike_after{600};
  /// The prefill processes open each room this much after the decode process
  /// (its requests wait at the prefill ranks meanwhile): rooms are in flight
  /// at any moment, whatever a room's own transfer takes.
  std::chrono::milliseconds prefill_lag{0};
  /// The struck prefill rank's process holds this many MiB of touched
  /// memory besides its pools (kvferry-demo --hold-mib): its teardown, and
  /// so its sockets' close, takes longer with it (the start waits for it).
  uint32_t hold_mib = 0;
  std::vector<std::string> extra;   ///< more options for every process
  std::string log_level = "error";  ///< kvferry.log-level of every process
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
  /// When the restarted processes were up (a restarted prefill instance: its
  /// bootstrap listening again; else when they were started); 0 without one.
  int64_t restarted_ns = 0;
  /// When every restarted process printed "ready" (its ranks up); 0 without
  /// a restart.
  int64_t replacement_ready_ns = 0;
  int64_t epoch_ns = 0;  ///< when room 1 opened on decode
  int64_t interval_ns = 0;

  /// When room `room` opened on decode (paced arrivals; on prefill prefill_lag
  /// later).
  int64_t opened_ns(uint64_t room) const {
    return epoch_ns + static_cast<int64_t>(room - 1) * interval_ns;
  }
  /// When room `room` really opened on decode (decode_opened_ns), or by its
  /// pacing when that was not printed.
  int64_t opened_at(uint64_t room) const {
    auto o = decode_opened_ns.find(room);
    return o != decode_opened_ns.end() ? o->second : opened_ns(room);
  }
  /// Every surviving rank's conclusions, by room.
  std::map<uint64_t, std::vector<rank_conclusion>> rooms;
  /// When the decode process's scheduler really opened each room (it runs
  /// behind its pacing when the machine is busy): a room is live from then.
  std::map<uint64_t, int64_t> decode_opened_ns;
  std::vector<std::string> outputs;         ///< each process's output, for diagnostics
  std::vector<std::string> struck_outputs;  ///< what the struck processes printed
  std::string error;                        ///< set when the trial itself could not run

  /// Rooms that were live at the strike: opened before it, concluded after.
  /// Opened by their pacing, or with `as_opened` when the decode scheduler
  /// really opened them (it runs behind its pacing on a busy machine: a room
  /// it opened after the strike failed at once, and is no struck room).
  /// With `failed`, only those some rank concluded Failed: a room whose
  /// bytes had all landed before the strike succeeds a moment after it, and
  /// says nothing of how soon a fault is known.
  std::vector<uint64_t> struck(bool as_opened = false, bool failed = false) const;
  /// From the strike to the last survivor's conclusion of a struck room, ms.
  double strike_to_all_concluded_ms(bool as_opened = false, bool failed = false) const;
  /// A struck room whose survivors did not all conclude the same: Success
  /// (its bytes had all landed before the strike), or Failed with one cause;
  /// a prefill rank that concluded alone (no decode rank reached it for the
  /// room) only has to conclude Failed.
  std::vector<std::string> disagreements() const;
  /// The same check over every room of the run, struck or not.
  std::vector<std::string> disagreements_in_every_room() const;
  /// Rooms that every one of `ranks` ranks concluded Success, among those
  /// opened after `after_ns`.
  uint32_t successes_after(int64_t after_ns, size_t ranks) const;
  /// Fail fast: for every room opened after `after_ns` (the instance known
  /// dead by then) and before `before_ns` that every surviving rank
  /// concluded Failed, ms from its opening to the last rank's conclusion.
  std::vector<double> fail_fast_ms(int64_t after_ns, int64_t before_ns) const;
  /// ms from `since_ns` (a restart) to the conclusion, on every one of
  /// `ranks` ranks, of the first room opened after it that succeeded
  /// everywhere; negative when none did.
  double first_success_after_ms(int64_t since_ns, size_t ranks) const;
};

failover_result run_failover(const failover_options& o);

/// A prefill rank that no decode rank reached for the room (it opened as the
/// rank was killed, or the instance was cut off first): it has no decider to
/// hear from and concludes Failed alone, with its own cause.
bool concluded_alone(const rank_conclusion& c);

}  // namespace kvferry::apps
