// kvferry-launch --local: every node of a cluster file on this machine, one
// process each, their output relayed line by line (prefixed with the node),
// crashed ones started again by the file's restart policy, all of them killed
// after a timeout: a run that always ends.
#pragma once

#include <cstdint>
#include <string>

#include "apps/common/cluster_file.hpp"

namespace kvferry::launch {

/// What --local passes on to every node process.
struct local_options {
  std::string exe;      ///< this kvferry-launch
  std::string cluster;  ///< the cluster file's path
  std::string processes;
  std::string log_level;
  std::string log_format;
  int64_t epoch_ns = 0;
  bool print_conclusions = false;
  uint32_t timeout_s = 600;  ///< the nodes are killed after it
};

/// --local: one child per node, the nodes that host a prefill instance first
/// (each until its bootstraps listen), then the others. A node whose process
/// dies abnormally is started again by its restart policy until the timeout.
int run_local(const local_options& cfg, const cluster_spec& c);

}  // namespace kvferry::launch
