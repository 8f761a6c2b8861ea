// Restarting what kvferry-launch started, by the cluster file's restart
// policy: a node process its per-rank children, --local its node processes.
// How an exit reads, whether it was a crash, and when to start the process
// again. Header only; used by node_runner.cpp and main.cpp.
//
// Finished or crashed: a process that did its workload prints a line saying
// so before it returns (done_line(): "rank INSTANCE/INDEX workload done" from
// a per-rank child, "node NAME workload done" from a node process). Whoever
// supervises it looks for that line in what it printed:
//   - it printed the line: finished, whatever the exit (0: every room
//     succeeded, 1: some failed, which is a result; a crash while shutting
//     down after it is not worth doing the workload again for);
//   - otherwise, killed by a signal: crashed;
//   - otherwise, exit code 0: stopped cleanly (a serving process that took
//     SIGINT or SIGTERM), not restarted;
//   - exit code 2: its file or command line was refused, which a restart
//     does not change (the systemd unit's RestartPreventExitStatus=2);
//   - any other exit code (1 before the workload finished: a rank that did
//     not start, an exception): crashed.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "apps/common/cluster_file.hpp"

namespace kvferry::launch {

/// The line a process prints once its workload is done; `who` is "rank
/// INSTANCE/INDEX" or "node NAME".
inline std::string done_line(const std::string& who) {
  return who + " workload done";
}

/// An exit as apps::child_process::wait() returns it: the exit code, or 128 +
/// the signal for a process killed by one (kvferry-launch itself exits with
/// 0, 1 or 2, so a code above 128 is a signal), -1 when wait() killed it.
inline std::string exit_reason(int rc) {
  if (rc > 128)
    return "killed by signal " + std::to_string(rc - 128);
  if (rc < 0)
    return "killed at the timeout";
  return "exit code " + std::to_string(rc);
}

/// Whether exit `rc` is a crash (see the top of this file); `finished`: the
/// process printed its done_line().
inline bool crashed(int rc, bool finished) {
  if (finished || rc < 0)
    return false;
  return rc > 128 || (rc != 0 && rc != 2);
}

/// Restarts of one supervised process (a rank's, or a node's).
struct restart_tracker {
  restart_policy policy;
  uint32_t restarts = 0;  ///< so far, over the supervisor's life
  uint32_t streak = 0;    ///< consecutive ones: the delay doubles along it
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();

  /// After a crash: the delay before the next start (counted as a restart),
  /// or nullopt when the policy is never or restart_limit is reached. A
  /// process that stayed up longer than the longest delay was not in a crash
  /// loop: its streak starts over, from restart_backoff.
  std::optional<std::chrono::nanoseconds> next(
      std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now()) {
    if (!policy.on() || restarts >= policy.limit)
      return std::nullopt;
    if (now - started > policy.backoff_max)
      streak = 0;
    ++restarts;
    ++streak;
    return policy.delay(streak);
  }

  /// "restart 2 of 10 in 400ms", for the line of the restart `next` gave.
  std::string what(std::chrono::nanoseconds delay) const {
    return "restart " + std::to_string(restarts) + " of " + std::to_string(policy.limit) + " in " +
           format_duration(delay);
  }
};

/// Paced workloads under an on-failure policy: a supervisor fixes the clock
/// origin of the processes it starts (so that a restarted one takes the
/// origin of the one it replaces, and skips the rooms whose time has passed)
/// this far ahead of now, for `processes` processes started one after
/// another: none of them should start driving after the origin, or it would
/// skip rooms the others open (a second each, and two for the first: CAF, the
/// pools and the ranks take well under that on an idle machine).
inline std::chrono::nanoseconds origin_lead(size_t processes) {
  return std::chrono::seconds{1} + std::chrono::seconds{1} * static_cast<int64_t>(processes);
}

}  // namespace kvferry::launch
