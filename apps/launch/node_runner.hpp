// What one node of a cluster file runs: the bootstrap of each prefill
// instance it hosts (published on the node's host at the file's port), the
// decider of each decode instance, a status actor (published on the node's
// status port, read by kvferry-ctl), and the ranks of every instance: all in
// this process (per-node), or one child process per rank (per-rank, as a GPU
// server runs them; the children die with this process). With a workload,
// the synthetic scheduler (apps/common/scheduler_driver.hpp) drives each
// instance's share of the rooms, checks every byte, prints progress and a
// report. kvferry-launch --cluster FILE --node NAME calls run_node().
//
// Per-rank children are supervised by the node's restart policy (the cluster
// file's restart keys): one that dies abnormally is started again with the
// same command line after the backoff, up to restart_limit times, with a line
// "rank INSTANCE/INDEX exited (REASON); restart N of LIMIT in DELAY" and a
// rank_exit to the node's status actor. supervision.hpp says how a crash is
// told from a finished workload.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>

#include <caf/actor_system.hpp>

#include "apps/common/cluster_file.hpp"
#include "apps/launch/stop_signals.hpp"

namespace kvferry::launch {

/// What the command line adds to the file.
struct node_options {
  std::optional<process_mode> processes;  ///< overrides the file's
  bool print_conclusions = false;         ///< one line per rank and room
  /// With a workload: once it is done, serve status and /metrics until
  /// SIGINT or SIGTERM (blocked before the actor system started).
  bool linger = false;
  /// Paced workloads: the clock origin every node shares (0: this node's
  /// start; per-rank children under an on-failure policy share one the node
  /// fixes, so that a restarted child skips the rooms whose time has passed).
  int64_t epoch_ns = 0;
  /// Per-rank children (set by their node process): the rank to host,
  /// "INSTANCE/INDEX", the node's status port and the instance's decider port.
  std::string rank;
  uint16_t parent_status_port = 0;
  uint16_t decider_port = 0;
  /// This process replaces one that crashed (its supervisor's restart): its
  /// drivers join the work where the instance is (workload::resume_at,
  /// workload::follow_requests), not where the clock says.
  bool restarted = false;
  /// For starting children: this binary, the file as given, the log level
  /// and format.
  std::string exe;
  std::string cluster_path;
  std::string log_level = "warn";
  std::string log_format = "text";  ///< text or json (kvferry::log_format_from)
};

/// Runs node `node` of `c` on `sys` (whose config is a kvferry::config).
/// With a workload, returns once every room concluded: 0 when every room
/// succeeded (and, on decode, every byte matched), 1 otherwise, and prints
/// "node NAME workload done" (or, in a per-rank child, "rank INSTANCE/INDEX
/// workload done") just before. Without one, serves until SIGINT or SIGTERM
/// (blocked with block_stop_signals() before `sys` started) and returns 0.
/// Errors at start (a port in use, a node the file does not name) are
/// printed to `err` with the file's line, and return 2 (the file) or 1 (the
/// system). Prints "bootstrap of INSTANCE listening on HOST:PORT" per prefill
/// instance once it is published.
int run_node(caf::actor_system& sys, const cluster_spec& c, const std::string& node,
             const node_options& opts, std::ostream& out, std::ostream& err);

}  // namespace kvferry::launch
