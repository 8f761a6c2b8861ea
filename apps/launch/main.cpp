// kvferry-launch: starts a cluster described by one TOML file.
//
//   kvferry-launch --cluster FILE --node NAME   what node NAME runs, in this process
//   kvferry-launch --cluster FILE --local       every node of FILE on this machine, one
//                                               process each, and a summary
//   kvferry-launch --cluster FILE --check       parse the file, print what it describes
//   kvferry-launch --cluster FILE --list-nodes  one line per node: NAME HOST (for scripts)
//
// --processes=per-rank|per-node overrides the file's choice: one child process
// per rank (killed with its node's process), or every rank in the node's.
//
// A node's restart policy (the file's restart keys) applies to its per-rank
// children, restarted by the node's process, and under --local to the node's
// own process, restarted by this one: a process that dies abnormally starts
// again with the same command line after the backoff, at most restart_limit
// times (apps/launch/supervision.hpp).
//
// --log-format=text|json: the log as text lines (the default) or one JSON
// object per line for log shippers (actors/base/log_json.hpp); passed on to the
// nodes under --local and to per-rank children, like --kvferry.log-level.
// KVFERRY_LOG_FORMAT in the environment wins, as KVFERRY_LOG_LEVEL does.
//
// Errors in the file are refused before anything starts, one line each:
// "FILE:LINE: reason". The exit code is 0 when every node succeeded, 1 when a
// node or a room failed, 2 for a bad file or command line.
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <fstream>

#include <chrono>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <caf/actor_system.hpp>

#include "actors/base/log.hpp"
#include "actors/base/log_json.hpp"
#include "actors/gateway/tls.hpp"
#include "actors/process/config.hpp"
#include "apps/common/child_process.hpp"
#include "apps/common/cluster_file.hpp"
#include "apps/common/whole_lines.hpp"
#include "apps/launch/local_cluster.hpp"
#include "apps/launch/node_runner.hpp"
#include "apps/launch/supervision.hpp"
#include "messages/wall_clock.hpp"

namespace {

using namespace kvferry;
using namespace kvferry::launch;

struct launch_config : kvferry::config {
  std::string cluster;
  std::string node;
  bool local = false;
  bool check = false;
  bool list_nodes = false;
  uint32_t local_timeout_s = 600;
  bool exit_with_parent = false;
  std::string processes;
  std::string log_format = "text";
  bool print_conclusions = false;
  bool linger = false;
  int64_t epoch_ns = 0;
  std::string rank;
  uint16_t status_port = 0;
  uint16_t decider_port = 0;
  int32_t parent_pid = 0;
  bool restarted = false;

  launch_config() {
    // No automatic connections: two processes that learn of each other
    // through a third connect to each other at once, and CAF 0.17 then closes
    // both connections (every actor across them reads down). Connections are
    // explicit and one-way instead: a prefill rank process never connects to
    // a decode process; decode ranks and deciders connect to the prefill
    // ranks' published actors (rank_registration::control, reach_peers).
    opt_group{custom_options_, "global"}
        .add(cluster, "cluster", "the cluster file (TOML), see deploy/clusters/")
        .add(node, "node", "run the node of this name")
        .add(local, "local", "run every node of the file on this machine, one process each")
        .add(check, "check", "check the file and print what it describes, start nothing")
        .add(list_nodes, "list-nodes", "print NAME HOST per node of the file, start nothing")
        .add(processes, "processes",
             "per-rank (one process per rank) or per-node (all ranks in one); overrides the file")
        .add(log_format, "log-format",
             "text (the default) or json: one JSON object per log line, for log shippers "
             "(KVFERRY_LOG_FORMAT wins)")
        .add(print_conclusions, "print-conclusions",
             "print when each rank concluded each room, and how")
        .add(linger, "linger",
             "--node with a workload: once it is done, keep serving status and /metrics "
             "until SIGINT or SIGTERM (the exit code is still the workload's)")
        .add(epoch_ns, "epoch-ns",
             "paced workloads: the clock origin (ns since the Unix epoch) every node shares")
        .add(rank, "rank", "internal (per-rank children): host rank INSTANCE/INDEX only")
        .add(status_port, "status-port", "internal (per-rank children): the node's status port")
        .add(decider_port, "decider-port", "internal (per-rank children): the decider's port")
        .add(restarted, "restarted",
             "internal: this process replaces one that crashed; its drivers join the work "
             "where its instance is")
        .add(parent_pid, "parent-pid",
             "internal: with --exit-with-parent, the parent that must still be alive")
        .add(local_timeout_s, "local-timeout", "--local: seconds before the nodes are killed")
        .add(exit_with_parent, "exit-with-parent",
             "--node: stop when the parent process exits (what --local passes)");
  }
};

std::string self_path() {
  std::string buf(4096, '\0');
  auto n = ::readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  buf.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return buf;
}

void print_summary(const cluster_spec& c) {
  std::cout << c.file << ": " << c.nodes.size() << " nodes, " << c.instances.size()
            << " instances, " << c.transport << " data plane, " << to_string(c.processes)
            << " processes\n";
  for (auto& n : c.nodes) {
    std::cout << "  node " << n.name << " on " << n.host << ": " << to_string(c.processes_of(n))
              << " processes, status port ";
    if (n.status_port != 0)
      std::cout << n.status_port;
    else
      std::cout << "any free one (kvferry-ctl cannot find it)";
    std::cout << ", restart " << to_string(n.restart) << "\n";
  }
  for (auto& i : c.instances) {
    std::cout << "  " << i.name << ": " << to_string(i.role) << " TP " << i.tp << " x PP " << i.pp
              << " on node " << i.node << " (" << c.find_node(i.node)->host << ")";
    if (i.role == instance_role::prefill)
      std::cout << ", bootstrap port " << i.bootstrap_port;
    else {
      std::cout << ", receives from ";
      for (size_t k = 0; k < i.prefills.size(); ++k)
        std::cout << (k ? ", " : "") << i.prefills[k];
    }
    std::cout << "\n";
  }
  if (c.workload)
    std::cout << "  workload: " << c.workload->requests << " requests of " << c.workload->min_tokens
              << ".." << c.workload->max_tokens << " tokens, model " << c.workload->model
              << ", page size " << c.workload->page_size
              << (c.workload->requests_per_second > 0
                      ? ", " + std::to_string(c.workload->requests_per_second) + " per second"
                      : std::string{", as fast as possible"})
              << "\n";
}

/// Under [tls], loads the node's certificate into `cfg`. Without it, a node
/// that listens on anything but loopback refuses to start, unless the file
/// says `insecure = true` (then it warns loudly). False when it must not
/// start or a TLS file cannot be read.
bool secure_control_plane(launch_config& cfg, const cluster_spec& c) {
  auto* n = c.find_node(cfg.node);
  if (!n)
    return true;  // run_node names the error
  if (!c.tls) {
    if (loopback_host(n->host))
      return true;
    if (!c.insecure) {
      std::cerr << c.file << ": node " << n->name << " listens on " << n->host
                << " without [tls]: its control plane would be UNAUTHENTICATED and "
                   "UNENCRYPTED (anyone who reaches its ports could register ranks and fail "
                   "rooms). Add a [tls] table (deploy/make-certs.sh makes the certificates; "
                   "docs/SECURITY.md), or say insecure = true at the top of the file to run "
                   "it so anyway."
                << std::endl;
      return false;
    }
    std::cerr << "kvferry-launch: WARNING: node " << n->name << " listens on " << n->host
              << " with an UNAUTHENTICATED, UNENCRYPTED control plane (insecure = true): "
                 "anyone who reaches its ports can register ranks and fail rooms. Add a [tls] "
                 "table (deploy/make-certs.sh makes the certificates; docs/SECURITY.md)."
              << std::endl;
    return true;
  }
  auto files = c.tls->files_of(n->name);
  if (auto why = check_tls_files(files); !why.empty()) {
    std::cerr << c.file << ":" << c.tls->line << ": [tls] of node " << n->name << ": " << why
              << "\n";
    return false;
  }
  enable_tls(cfg, files);
  return true;
}

}  // namespace

// Not CAF_MAIN: its exec_main drops the exit code.
int main(int argc, char** argv) {
  // One write per line: the report shares a pipe with the log (stderr) when a
  // parent captures both, and a block-buffered stdout split report lines.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  // CAF reads "--cluster=FILE"; "--cluster FILE" is joined into that form.
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "--cluster" || a == "--node" || a == "--local-timeout" || a == "--processes" ||
         a == "--log-format") &&
        i + 1 < argc)
      a += "=" + std::string{argv[++i]};
    args.push_back(std::move(a));
  }
  launch_config cfg;
  if (auto err = cfg.parse(args)) {
    std::cerr << "kvferry-launch: " << caf::to_string(err) << "\n";
    return 2;
  }
  if (cfg.cli_helptext_printed)
    return 0;
  if (cfg.cluster.empty() || (cfg.node.empty() && !cfg.local && !cfg.check && !cfg.list_nodes) ||
      (!cfg.node.empty() && cfg.local)) {
    std::cerr << "kvferry-launch: expected --cluster=FILE with one of --node=NAME, --local, "
                 "--check or --list-nodes\n";
    return 2;
  }
  auto format = log_format_from(cfg.log_format);
  if (!format) {
    std::cerr << "kvferry-launch: --log-format=" << cfg.log_format
              << " is not a log format; expected text or json\n";
    return 2;
  }
  set_log_format(*format);
  node_options opts;
  if (!cfg.processes.empty()) {
    opts.processes = parse_process_mode(cfg.processes);
    if (!opts.processes) {
      std::cerr << "kvferry-launch: --processes=" << cfg.processes
                << " is not a process mode; expected per-rank or per-node\n";
      return 2;
    }
  }
  auto parsed = load_cluster(cfg.cluster);
  if (!parsed.cluster) {
    for (auto& e : parsed.errors)
      std::cerr << e << "\n";
    std::cerr << "kvferry-launch: " << cfg.cluster << " refused (" << parsed.errors.size()
              << (parsed.errors.size() == 1 ? " error" : " errors") << "); nothing started\n";
    return 2;
  }
  auto& c = *parsed.cluster;
  if (cfg.check) {
    print_summary(c);
    return 0;
  }
  if (cfg.list_nodes) {
    for (auto& n : c.nodes)
      std::cout << n.name << " " << n.host << "\n";
    return 0;
  }
  if (cfg.local) {
    local_options lo;
    lo.exe = self_path();
    lo.cluster = cfg.cluster;
    lo.processes = cfg.processes;
    lo.log_level = cfg.log_level;
    lo.log_format = cfg.log_format;
    lo.epoch_ns = cfg.epoch_ns;
    lo.print_conclusions = cfg.print_conclusions;
    lo.timeout_s = cfg.local_timeout_s;
    return run_local(lo, c);
  }
  if (cfg.exit_with_parent) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    // The parent may have gone between its fork and this prctl.
    if (cfg.parent_pid != 0 && ::getppid() != cfg.parent_pid)
      return 1;
  }
  set_log_level(cfg.log_level);
  if (!secure_control_plane(cfg, c))
    return 2;
  if (!c.workload || (cfg.linger && cfg.rank.empty()))
    block_stop_signals();  // before the actor system's threads: a serving node takes them
  opts.linger = cfg.linger && cfg.rank.empty();
  opts.print_conclusions = cfg.print_conclusions;
  opts.epoch_ns = cfg.epoch_ns;
  opts.rank = cfg.rank;
  opts.parent_status_port = cfg.status_port;
  opts.decider_port = cfg.decider_port;
  opts.restarted = cfg.restarted;
  opts.exe = self_path();
  opts.cluster_path = cfg.cluster;
  opts.log_level = cfg.log_level;
  opts.log_format = cfg.log_format;
  caf::actor_system sys{cfg};
  return run_node(sys, c, cfg.node, opts, std::cout, std::cerr);
}
