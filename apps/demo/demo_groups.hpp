// kvferry-demo's instances: each side's DP groups (one group without DP),
// each an instance of tp / dp ranks with its own bootstrap (prefill) or
// decider (decode); starting them, driving them with the synthetic
// scheduler, and printing their reports.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <caf/actor_system.hpp>

#include "apps/common/hosted_ranks.hpp"
#include "apps/demo/demo_config.hpp"
#include "messages/handles.hpp"

namespace kvferry::demo {

/// One DP group of a side this process hosts: its ranks and its report.
struct group_run {
  std::string name;
  uint32_t index = 0;
  hosted_ranks ranks;
  std::optional<run_report> report;
};

/// Spawns the bootstrap of prefill instance (or DP group) `name` and
/// publishes it on loopback, on `port` (0: any free one).
std::optional<std::pair<bootstrap_actor, uint16_t>> publish_bootstrap(caf::actor_system& sys,
                                                                      const demo_config& cfg,
                                                                      const std::string& name,
                                                                      uint16_t port);

/// Why the DP flags cannot run as given, or nullopt.
std::optional<std::string> dp_problem(const demo_config& cfg);

/// Starts the ranks of every DP group of one side into `out`; what did not
/// start (the group and the rank), or nullopt.
std::optional<std::string> start_groups(caf::actor_system& sys, const demo_config& cfg, role side,
                                        const model_shape& shape, const std::set<uint32_t>& hosted,
                                        const std::vector<bootstrap_locator>& boots,
                                        const std::vector<decider_actor>& deciders,
                                        std::vector<group_run>& out);

/// Drives every group of both sides until each room concluded.
void drive_all(std::vector<group_run>& pre, std::vector<group_run>& post, const workload& w,
               const std::vector<bootstrap_locator>& boots, const demo_config& cfg);

/// Prints each group's report (when there are several) and the side's; 1
/// when a room of the side failed or a byte differed.
int print_side(std::vector<group_run>& groups, const std::string& side, const demo_config& cfg,
               const model_shape& shape);

}  // namespace kvferry::demo
