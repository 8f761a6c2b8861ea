// What kvferry-ctl status reads from a running cluster: each node's status
// actor (published on the node's status_port) and each prefill instance's
// bootstrap (its topology: which ranks registered), both through CAF's
// middleman with a timeout, so a frozen or dead node reads "unreachable"
// instead of hanging.
#pragma once

#include <iosfwd>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>

#include "apps/common/cluster_file.hpp"
#include "messages/bootstrap.hpp"
#include "messages/node_status.hpp"

namespace kvferry::ctl {

struct node_answer {
  const launch::node_spec* node = nullptr;
  std::optional<node_status> status;
  std::string error;  ///< why there is no status
};

struct bootstrap_answer {
  const launch::instance_spec* instance = nullptr;
  std::optional<topology> topo;
  std::string error;
};

struct cluster_view {
  std::vector<node_answer> nodes;
  std::vector<bootstrap_answer> bootstraps;
};

/// The nodes whose health node `node` depends on: itself and the nodes of the
/// prefill instances it hosts or receives from.
std::set<std::string> peers_of(const launch::cluster_spec& c, const std::string& node);

/// Asks every node in `nodes` (all when empty) and the bootstraps of the
/// prefill instances on them, each within `timeout`.
cluster_view gather(caf::actor_system& sys, const launch::cluster_spec& c,
                    const std::set<std::string>& nodes, caf::timespan timeout);

/// True when every node answered, every rank it should host reported and is
/// up, and every bootstrap answered with a complete topology.
bool healthy(const cluster_view& v);

/// The report for people.
void print(std::ostream& out, const launch::cluster_spec& c, const cluster_view& v);

}  // namespace kvferry::ctl
