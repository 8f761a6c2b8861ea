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
// Errors in the file are refused before anything starts, one line each:
// "FILE:LINE: reason". The exit code is 0 when every node succeeded, 1 when a
// node or a room failed, 2 for a bad file or command line.
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <fstream>

#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>

#include "actors/config.hpp"
#include "actors/log.hpp"
#include "apps/common/child_process.hpp"
#include "apps/launch/cluster_file.hpp"
#include "apps/launch/node_runner.hpp"

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
  bool print_conclusions = false;
  int64_t epoch_ns = 0;
  std::string rank;
  uint16_t status_port = 0;
  uint16_t decider_port = 0;
  int32_t parent_pid = 0;

  launch_config() {
    // Per-rank processes learn of each other through third processes (a
    // decider hears of prefill ranks from decode ranks in other processes):
    // let the middleman connect them directly, or messages take routes
    // through nodes that CAF 0.17 does not relay reliably.
    set("middleman.enable-automatic-connections", true);
    opt_group{custom_options_, "global"}
        .add(cluster, "cluster", "the cluster file (TOML), see deploy/clusters/")
        .add(node, "node", "run the node of this name")
        .add(local, "local", "run every node of the file on this machine, one process each")
        .add(check, "check", "check the file and print what it describes, start nothing")
        .add(list_nodes, "list-nodes", "print NAME HOST per node of the file, start nothing")
        .add(processes, "processes",
             "per-rank (one process per rank) or per-node (all ranks in one); overrides the file")
        .add(print_conclusions, "print-conclusions",
             "print when each rank concluded each room, and how")
        .add(epoch_ns, "epoch-ns",
             "paced workloads: the clock origin (ns since the Unix epoch) every node shares")
        .add(rank, "rank", "internal (per-rank children): host rank INSTANCE/INDEX only")
        .add(status_port, "status-port", "internal (per-rank children): the node's status port")
        .add(decider_port, "decider-port", "internal (per-rank children): the decider's port")
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
      std::cout << n.status_port << "\n";
    else
      std::cout << "any free one (kvferry-ctl cannot find it)\n";
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

/// Prints a child's output, each line prefixed with its node.
void print_output(const std::string& node, const std::string& text) {
  size_t at = 0;
  while (at < text.size()) {
    auto nl = text.find('\n', at);
    auto end = nl == std::string::npos ? text.size() : nl;
    std::cout << "[" << node << "] " << text.substr(at, end - at) << "\n";
    at = end + 1;
  }
}

/// --local: one child per node, the nodes that host a prefill instance first
/// (each until its bootstraps listen), then the others.
int run_local(const launch_config& cfg, const cluster_spec& c) {
  auto exe = self_path();
  struct child {
    std::string node;
    std::unique_ptr<apps::child_process> proc;
    int rc = -1;
  };
  std::vector<child> children;
  auto hosts_prefill = [&](const node_spec& n) {
    for (auto& i : c.instances)
      if (i.node == n.name && i.role == instance_role::prefill)
        return true;
    return false;
  };
  bool failed = false;
  for (bool first : {true, false})
    for (auto& n : c.nodes) {
      if (failed || hosts_prefill(n) != first)
        continue;
      std::vector<std::string> argv{exe,
                                    "--cluster=" + cfg.cluster,
                                    "--node=" + n.name,
                                    "--kvferry.log-level=" + cfg.log_level,
                                    "--exit-with-parent",
                                    "--parent-pid=" + std::to_string(::getpid())};
      // A paced workload counts from each node's own start unless given one
      // clock origin: nodes start one after another here, and with a shared
      // origin the later ones would skip the rooms whose time has passed.
      if (cfg.epoch_ns != 0)
        argv.push_back("--epoch-ns=" + std::to_string(cfg.epoch_ns));
      if (!cfg.processes.empty())
        argv.push_back("--processes=" + cfg.processes);
      if (cfg.print_conclusions)
        argv.push_back("--print-conclusions");
      children.push_back({n.name, std::make_unique<apps::child_process>(argv)});
      auto& ch = children.back();
      for (auto& i : c.instances) {
        if (i.node != n.name || i.role != instance_role::prefill)
          continue;
        auto want = "bootstrap of " + i.name + " listening on";
        if (!ch.proc->wait_for_line(
                [&](const std::string& l) { return l.find(want) != std::string::npos; },
                std::chrono::seconds{30})) {
          std::cerr << "kvferry-launch: node " << n.name << ": the bootstrap of " << i.name
                    << " did not come up; starting no more nodes\n";
          failed = true;
          break;
        }
      }
    }
  // Stream what the nodes print, line by line, until each has exited (or the
  // timeout: then wait() kills it).
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds{cfg.local_timeout_s};
  std::vector<size_t> printed(children.size(), 0);
  std::vector<bool> done(children.size(), false);
  auto flush = [&](size_t k, bool all) {
    auto& text = children[k].proc->output();
    auto end = all ? text.size() : text.rfind('\n') + 1;
    if (text.rfind('\n') == std::string::npos && !all)
      return;
    if (end > printed[k])
      print_output(children[k].node, text.substr(printed[k], end - printed[k]));
    printed[k] = std::max(printed[k], end);
  };
  for (size_t left = children.size(); left > 0;) {
    bool late = std::chrono::steady_clock::now() >= until;
    for (size_t k = 0; k < children.size(); ++k) {
      if (done[k])
        continue;
      auto& ch = children[k];
      ch.proc->wait_for_line([](const std::string&) { return false; },
                             std::chrono::milliseconds{20});
      flush(k, false);
      if (late || ch.proc->exited()) {
        ch.rc = ch.proc->wait(late ? std::chrono::milliseconds{0} : std::chrono::seconds{10});
        flush(k, true);
        done[k] = true;
        --left;
      }
    }
  }
  int bad = 0;
  std::cout << "kvferry-launch: ";
  for (auto& ch : children) {
    std::cout << "node " << ch.node << " "
              << (ch.rc == 0  ? "ok"
                  : ch.rc < 0 ? "killed (timeout)"
                              : "failed")
              << " (exit " << ch.rc << "), ";
    bad += ch.rc != 0;
  }
  if (failed)
    bad += static_cast<int>(c.nodes.size() - children.size());
  std::cout << c.nodes.size() << " nodes, " << bad << " failed" << std::endl;
  return bad == 0 && !failed ? 0 : 1;
}

}  // namespace

// Not CAF_MAIN: its exec_main drops the exit code.
int main(int argc, char** argv) {
  // CAF reads "--cluster=FILE"; "--cluster FILE" is joined into that form.
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "--cluster" || a == "--node" || a == "--local-timeout" || a == "--processes") &&
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
  if (cfg.local)
    return run_local(cfg, c);
  if (cfg.exit_with_parent) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    // The parent may have gone between its fork and this prctl.
    if (cfg.parent_pid != 0 && ::getppid() != cfg.parent_pid)
      return 1;
  }
  set_log_level(cfg.log_level);
  opts.print_conclusions = cfg.print_conclusions;
  opts.epoch_ns = cfg.epoch_ns;
  opts.rank = cfg.rank;
  opts.parent_status_port = cfg.status_port;
  opts.decider_port = cfg.decider_port;
  opts.exe = self_path();
  opts.cluster_path = cfg.cluster;
  opts.log_level = cfg.log_level;
  caf::actor_system sys{cfg};
  return run_node(sys, c, cfg.node, opts, std::cout, std::cerr);
}
