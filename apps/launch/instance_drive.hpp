// Driving the workload's rooms of an instance on the ranks this process
// hosts, as the cluster file's [workload] says (paced, routed as a router
// would), with progress lines, each rank's report to the node's status actor,
// and a restarted process rejoining the work where its instance is.
#pragma once

#include <cstdint>
#include <string>

#include "actors/facade/runtime.hpp"
#include "apps/common/cluster_file.hpp"
#include "apps/common/scheduler_driver.hpp"
#include "apps/launch/instance_start.hpp"
#include "apps/launch/line_printer.hpp"
#include "apps/launch/node_runner.hpp"
#include "apps/launch/status_actor.hpp"

namespace kvferry::launch {

/// The incarnation a rank reports (rank_report::generation): its instance's
/// generation as the runtime knows it.
uint64_t generation_of(const runtime& rt);

/// One report per hosted rank of `inst`, sent to the node's status actor
/// (`r`: the workload's report so far, or null while serving).
void report_to(const status_actor& status, const running_instance& inst, const apps::run_report* r,
               uint32_t rooms, bool finished);

/// Drives the workload's rooms of `inst` on the ranks this process hosts.
void drive(const cluster_spec& c, const node_options& opts, int64_t epoch, running_instance& inst,
           const status_actor& status, printer& p);

}  // namespace kvferry::launch
