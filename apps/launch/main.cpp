// kvferry-launch: starts a cluster described by one TOML file.
//
//   kvferry-launch --cluster FILE --node NAME   what node NAME runs, in this process
//   kvferry-launch --cluster FILE --local       every node of FILE on this machine, one
//                                               process each, and a summary
//   kvferry-launch --cluster FILE --check       parse the file, print what it describes
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
  uint32_t local_timeout_s = 600;
  bool exit_with_parent = false;

  launch_config() {
    opt_group{custom_options_, "global"}
        .add(cluster, "cluster", "the cluster file (TOML), see deploy/clusters/")
        .add(node, "node", "run the node of this name")
        .add(local, "local", "run every node of the file on this machine, one process each")
        .add(check, "check", "check the file and print what it describes, start nothing")
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
            << " instances, " << c.transport << " data plane\n";
  for (auto& i : c.instances) {
    std::cout << "  " << i.name << ": " << to_string(i.role) << " TP " << i.tp << " x PP " << i.pp
              << " on node " << i.node << " (" << c.find_node(i.node)->host << ")";
    if (i.role == instance_role::prefill)
      std::cout << ", bootstrap port " << i.bootstrap_port;
    else
      std::cout << ", receives from " << i.prefill;
    std::cout << "\n";
  }
  if (c.workload)
    std::cout << "  workload: " << c.workload->requests << " requests of " << c.workload->min_tokens
              << ".." << c.workload->max_tokens << " tokens, model " << c.workload->model
              << ", page size " << c.workload->page_size << "\n";
}

/// True once process `pid` (a child, not yet reaped) has exited: a zombie.
bool exited(int pid) {
  std::ifstream stat{"/proc/" + std::to_string(pid) + "/stat"};
  std::string line;
  std::getline(stat, line);
  auto paren = line.rfind(')');
  return paren == std::string::npos || (paren + 2 < line.size() && line[paren + 2] == 'Z');
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
      std::vector<std::string> argv{exe, "--cluster=" + cfg.cluster, "--node=" + n.name,
                                    "--kvferry.log-level=" + cfg.log_level, "--exit-with-parent"};
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
      if (late || exited(ch.proc->pid())) {
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
    if ((a == "--cluster" || a == "--node" || a == "--local-timeout") && i + 1 < argc)
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
  if (cfg.cluster.empty() || (cfg.node.empty() && !cfg.local && !cfg.check) ||
      (!cfg.node.empty() && cfg.local)) {
    std::cerr << "kvferry-launch: expected --cluster=FILE with one of --node=NAME, --local or "
                 "--check\n";
    return 2;
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
  if (cfg.local)
    return run_local(cfg, c);
  if (cfg.exit_with_parent)
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  set_log_level(cfg.log_level);
  caf::actor_system sys{cfg};
  return run_node(sys, c, cfg.node, std::cout, std::cerr);
}
