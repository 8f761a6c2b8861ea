// The status actor of a kvferry-launch node: one per node process, published
// on the node's status port. Whoever drives a rank (the node's own process,
// or a per-rank child) pushes a rank_report for it; the actor monitors each
// rank actor it hears of, so a rank whose actor or process went away reads
// down, with the exit reason. A per-rank node's process also tells it when a
// rank's child process exited and whether it restarts it (rank_exit): the
// rank keeps its restart count and last exit reason across incarnations.
// kvferry-ctl asks it with status_atom.
#pragma once

#include "actors/base/sender_check.hpp"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <caf/actor_addr.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "messages/node_status.hpp"

namespace kvferry::launch {

struct status_state {
  static inline const char* name = "kvferry.status";
  node_status now;                                                // node, pid, mode, expected
  std::map<std::pair<std::string, uint32_t>, rank_health> ranks;  // by (instance, index)
  std::map<caf::actor_addr, std::pair<std::string, uint32_t>> watched;
  bool stranger_told = false;          // a report for a rank not of this node was logged once
  bool handles_withheld_told = false;  // an answer without handles was logged once
  /// Under TLS: reports from processes that did not prove this node.
  stranger_log<caf::actor_addr> strangers;
};

/// Ranks a node keeps reports of when it was given no expected list.
constexpr size_t max_status_ranks = 4096;

/// `expected` lists "INSTANCE/INDEX" of every rank the node should host;
/// `metrics` is where its /metrics listens ("HOST:PORT", "" none).
status_actor::behavior_type node_status_actor(status_actor::stateful_pointer<status_state> self,
                                              std::string node, std::string mode,
                                              std::vector<std::string> expected,
                                              std::string metrics);

}  // namespace kvferry::launch
