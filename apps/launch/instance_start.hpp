// An instance as a node process hosts it: its coordinator (a prefill
// instance's bootstrap, published at the file's port; a decode instance's
// decider) and the ranks this process runs (all of them per node, one in a
// per-rank child, none in a per-rank node process).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>

#include "actors/bootstrap/bootstrap_actor.hpp"
#include "actors/decision/decider_actor.hpp"
#include "actors/metrics/registry.hpp"
#include "apps/common/cluster_file.hpp"
#include "apps/common/hosted_ranks.hpp"
#include "apps/common/scheduler_driver.hpp"
#include "apps/launch/line_printer.hpp"
#include "apps/launch/node_runner.hpp"

namespace kvferry::launch {

/// The ranks of one instance this process hosts (all of them per node, one
/// in a per-rank child, none in a per-rank node process).
struct running_instance {
  const instance_spec* spec = nullptr;
  apps::hosted_ranks hosted;
  std::vector<uint32_t> indices;  // of the hosted ranks
  bootstrap_actor boot;           // prefill, in the node process
  decider_actor dec;              // decode, in the node process
  uint16_t decider_port = 0;      // decode, per-rank: where the children find it
  std::optional<apps::run_report> report;
  /// This process's figures for Prometheus (one registry per process).
  std::shared_ptr<metrics::registry> metrics;
  /// A per-rank child: its reports carry its figures to the node.
  bool report_metrics = false;

  void stop() {
    hosted.stop();
    if (dec)
      caf::anon_send_exit(dec, caf::exit_reason::kill);
    if (boot)
      caf::anon_send_exit(boot, caf::exit_reason::kill);
  }
};

/// "FILE:LINE: ", the start of an error about the file's line `line`.
std::string at(const cluster_spec& c, uint32_t line);

/// Where the bootstrap of prefill instance `prefill` listens.
bootstrap_locator bootstrap_of(const cluster_spec& c, const instance_spec& prefill);

/// Spawns and publishes the bootstrap (prefill) or spawns the decider
/// (decode; published too when its ranks live in child processes).
bool start_coordinator(caf::actor_system& sys, const cluster_spec& c, const node_spec& node,
                       bool per_rank, running_instance& inst, printer& p, std::ostream& err);

/// Starts the ranks `indices` of `inst` in this process.
bool start_ranks_here(caf::actor_system& sys, const cluster_spec& c, const node_spec& node,
                      const node_options& opts, running_instance& inst, printer& p,
                      std::ostream& err);

/// Waits until something accepts TCP connections at host:port (a decode node
/// may start before its prefill node); false after `timeout`.
bool wait_reachable(const std::string& host, uint16_t port, std::chrono::nanoseconds timeout);

}  // namespace kvferry::launch
