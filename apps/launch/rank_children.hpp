// A node process's per-rank children (processes.per-rank): starting one per
// rank of an instance, relaying what each prints line by line (prefixed with
// the rank), and restarting those that crash by the node's restart policy
// (supervision.hpp says how a crash is told from a finished workload).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "apps/common/child_process.hpp"
#include "apps/common/cluster_file.hpp"
#include "apps/launch/line_printer.hpp"
#include "apps/launch/node_runner.hpp"
#include "apps/launch/status_actor.hpp"
#include "apps/launch/supervision.hpp"

namespace kvferry::launch {

/// A per-rank child of this node process, and how to start it again.
struct rank_child {
  std::string name;  // INSTANCE/INDEX
  std::string instance;
  uint32_t index = 0;
  std::vector<std::string> argv;
  std::unique_ptr<apps::child_process> proc;
  size_t printed = 0;
  bool done = false;
  int rc = -1;
  restart_tracker restarts;
  std::optional<std::chrono::steady_clock::time_point> restart_at;  // a restart is due then
};

/// Prints what the child printed since last time, each line prefixed; with
/// `all`, a last line without its newline too.
void relay(rank_child& ch, printer& p, bool all);

/// (Re)starts the process of `ch` with its argv (`again`: a restart, which
/// joins the work where its instance is).
void spawn(rank_child& ch, bool again = false);

/// Starts one child per rank of instance `s` (`decider_port`: where a decode
/// instance's children find its decider, 0 for prefill); false (children so
/// far kept) when one did not come up. A child that does not come up the
/// first time is not restarted: the node fails, as a node whose ranks do not
/// start does.
bool start_children(const cluster_spec& c, const node_spec& node, const node_options& opts,
                    uint16_t status_port, int64_t epoch, const instance_spec& s,
                    uint16_t decider_port, std::vector<rank_child>& out, printer& p,
                    std::ostream& err);

/// A child has exited: restarts it by the node's policy when it crashed, or
/// counts it as done. Tells the node's status actor about every abnormal exit.
void child_exited(rank_child& ch, const status_actor& status, printer& p);

/// Relays the children's output and restarts those that crash, until each
/// has exited for good (with a workload; the OR of their codes) or until
/// SIGINT or SIGTERM (`serving`, no workload; 0). Always ends: a child is
/// restarted at most restart_limit times, then counts as failed.
int supervise_children(std::vector<rank_child>& children, bool serving, const status_actor& status,
                       printer& p);

}  // namespace kvferry::launch
