// kvferry-ctl top: a live table of the cluster, refreshed every second from
// each node's /metrics (the file's metrics_port): per instance and rank,
// rooms/s, GB/s, rooms in flight, failures/s and peers down. On a terminal it
// behaves like top: it draws over itself on the alternate screen and quits on
// q (or Ctrl-C), leaving the terminal as it found it. Elsewhere (a pipe) it
// prints one table per refresh; --iterations=N stops after N.
#pragma once

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

#include "apps/common/cluster_file.hpp"
#include "apps/ctl/prometheus_text.hpp"

namespace kvferry::ctl {

/// What one refresh read from every node.
struct top_sample {
  std::chrono::steady_clock::time_point at;
  std::map<std::string, prom::prom_exposition> nodes;  ///< by node name
  std::map<std::string, std::string> errors;           ///< node → why it has no figures
};

/// Scrapes every node of `c` that has a metrics_port (each within `timeout`).
top_sample scrape_cluster(const launch::cluster_spec& c, std::chrono::milliseconds timeout);

/// The table for two successive samples (rates over the time between them;
/// `before` may be empty: rates read "-").
std::vector<std::string> top_table(const launch::cluster_spec& c, const top_sample& before,
                                   const top_sample& now);

/// Runs the live view until q, Ctrl-C or `iterations` refreshes (0: no end).
/// Returns 0, or 1 when no node has a metrics_port.
int run_top(const launch::cluster_spec& c, uint32_t iterations, std::ostream& out);

}  // namespace kvferry::ctl
