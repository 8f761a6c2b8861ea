// kvferry-ctl: what a running cluster is doing, read from the cluster itself.
//
//   kvferry-ctl --cluster FILE status               every node and bootstrap of FILE
//   kvferry-ctl --cluster FILE status --node NAME   node NAME and the nodes it depends on
//                                                   (a readiness probe: exit 0 when healthy)
//   kvferry-ctl --cluster FILE trace ROOM [--json]  one room across every rank: a timeline
//                                                   (apps/ctl/room_timeline.hpp)
//   kvferry-ctl --cluster FILE top                  a live table from each node's /metrics,
//                                                   every second; q quits
//                                                   (apps/ctl/cluster_top.hpp)
//
// Instances, ranks and their health (a rank whose actor or process went away
// reads DOWN with the reason), each rank's restarts (with the last exit
// reason of its process) and generation, rooms by state, the latest failures with their
// causes, and each prefill instance's registered ranks. Exit code: 0 healthy,
// 1 unhealthy or unreachable, 2 a bad file or command line.
#include <iostream>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>

#include "actors/base/log.hpp"
#include "actors/gateway/tls.hpp"
#include "actors/process/config.hpp"
#include "apps/common/cluster_file.hpp"
#include "apps/ctl/cluster_status.hpp"
#include "apps/ctl/cluster_top.hpp"
#include "apps/ctl/room_timeline.hpp"

namespace {

struct ctl_config : kvferry::config {
  std::string cluster;
  std::string node;
  caf::timespan timeout = std::chrono::seconds{3};
  std::string identity = "ctl";
  bool json = false;
  uint32_t iterations = 0;

  ctl_config() {
    opt_group{custom_options_, "global"}
        .add(cluster, "cluster", "the cluster file (TOML), see deploy/clusters/")
        .add(node, "node", "status: this node and the nodes it depends on only")
        .add(timeout, "timeout", "per node and bootstrap: how long to wait for an answer")
        .add(identity, "identity",
             "under [tls]: whose certificate to show the nodes (default ctl: ctl.pem, ctl.key)")
        .add(json, "json", "trace: one JSON object instead of the timeline")
        .add(iterations, "iterations", "top: stop after this many refreshes (0: at q)");
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args;
  std::string command;
  std::vector<std::string> operands;  // after the command
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "--cluster" || a == "--node" || a == "--timeout" || a == "--identity") &&
        i + 1 < argc)
      a += "=" + std::string{argv[++i]};
    if (!a.empty() && a[0] != '-' && command.empty())
      command = a;
    else if (!a.empty() && a[0] != '-')
      operands.push_back(std::move(a));
    else
      args.push_back(std::move(a));
  }
  ctl_config cfg;
  if (auto err = cfg.parse(args)) {
    std::cerr << "kvferry-ctl: " << caf::to_string(err) << "\n";
    return 2;
  }
  if (cfg.cli_helptext_printed)
    return 0;
  uint64_t room = 0;
  if (command == "trace") {
    size_t used = 0;
    try {
      if (operands.size() == 1)
        room = std::stoull(operands[0], &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (operands.size() != 1 || used != operands[0].size() || operands[0][0] == '-') {
      std::cerr << "kvferry-ctl: trace " << (operands.empty() ? "" : operands[0])
                << ": expected one room id, a number (kvferry-ctl --cluster=FILE trace ROOM)\n";
      return 2;
    }
  }
  if (cfg.cluster.empty() || (command != "status" && command != "trace" && command != "top") ||
      (command != "trace" && !operands.empty())) {
    std::cerr << "kvferry-ctl: expected --cluster=FILE status [--node=NAME], --cluster=FILE "
                 "trace ROOM [--json], or --cluster=FILE top\n";
    return 2;
  }
  auto parsed = kvferry::launch::load_cluster(cfg.cluster);
  if (!parsed.cluster) {
    for (auto& e : parsed.errors)
      std::cerr << e << "\n";
    return 2;
  }
  auto& c = *parsed.cluster;
  std::set<std::string> nodes;
  if (!cfg.node.empty()) {
    if (!c.find_node(cfg.node)) {
      std::cerr << "kvferry-ctl: --node=" << cfg.node << " names no [[node]] of " << cfg.cluster
                << "\n";
      return 2;
    }
    nodes = kvferry::ctl::peers_of(c, cfg.node);
  }
  kvferry::set_log_level(cfg.log_level);
  if (command == "top")  // HTTP to each node's /metrics: no actor system
    return kvferry::ctl::run_top(c, cfg.iterations, std::cout);
  if (c.tls) {
    auto files = c.tls->files_of(cfg.identity);
    if (auto why = kvferry::check_tls_files(files); !why.empty()) {
      std::cerr << c.file << ":" << c.tls->line << ": [tls] for --identity=" << cfg.identity << ": "
                << why << "\n";
      return 2;
    }
    kvferry::enable_tls(cfg, files);
  }
  int rc = 0;
  {
    caf::actor_system sys{cfg};
    auto v = kvferry::ctl::gather(sys, c, nodes, cfg.timeout);
    if (command == "trace") {
      auto t = kvferry::ctl::gather_trace(sys, v, room, cfg.timeout);
      if (cfg.json)
        kvferry::ctl::print_trace_json(std::cout, t);
      else
        kvferry::ctl::print_trace(std::cout, t);
      std::cout.flush();
      return t.events.empty() ? 1 : 0;
    }
    std::cout << "cluster " << c.file << ": " << c.nodes.size() << " nodes, " << c.instances.size()
              << " instances\n";
    kvferry::ctl::print(std::cout, c, v);
    std::cout.flush();
    rc = kvferry::ctl::healthy(v) ? 0 : 1;
  }
  return rc;
}
