// What one node of a cluster file runs, in one process: the bootstrap of each
// prefill instance it hosts (published on the node's host at the file's
// port), the decider of each decode instance, one runtime per rank of every
// instance, and, when the file has a workload, the synthetic scheduler on
// each instance (apps/common/scheduler_driver.hpp), which checks every byte
// and reports. kvferry-launch --cluster FILE --node NAME calls run_node().
#pragma once

#include <iosfwd>
#include <string>

#include <caf/actor_system.hpp>

#include "apps/launch/cluster_file.hpp"

namespace kvferry::launch {

/// Runs node `node` of `c` on `sys` (whose config is a kvferry::config).
/// With a workload, returns once every room concluded: 0 when every room
/// succeeded (and, on decode, every byte matched), 1 otherwise. Without one,
/// serves until SIGINT or SIGTERM and returns 0. Errors at start (a port in
/// use, a node the file does not name) are printed to `err` with the file's
/// line, and return 2 (the file) or 1 (the system). Prints "bootstrap of
/// INSTANCE listening on HOST:PORT" per prefill instance once it is published.
int run_node(caf::actor_system& sys, const cluster_spec& c, const std::string& node,
             std::ostream& out, std::ostream& err);

}  // namespace kvferry::launch
