#include "apps/launch/local_cluster.hpp"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "actors/base/log_json.hpp"
#include "apps/common/child_process.hpp"
#include "apps/common/whole_lines.hpp"
#include "apps/launch/supervision.hpp"
#include "messages/wall_clock.hpp"

namespace kvferry::launch {

namespace {

/// Prints a child's output, each line prefixed with its node.
/// Each line whole (one write): a node's line never lands inside another's.
void print_output(const std::string& node, const std::string& text) {
  std::string lines;
  size_t at = 0;
  while (at < text.size()) {
    auto nl = text.find('\n', at);
    auto end = nl == std::string::npos ? text.size() : nl;
    lines += kvferry::relayed_line(node, std::string_view{text}.substr(at, end - at)) + "\n";
    at = end + 1;
  }
  std::cout.flush();
  apps::say(lines);
}

}  // namespace

/// --local: one child per node, the nodes that host a prefill instance first
/// (each until its bootstraps listen), then the others. A node whose process
/// dies abnormally is started again by its restart policy until the timeout.
int run_local(const local_options& cfg, const cluster_spec& c) {
  auto& exe = cfg.exe;
  struct child {
    const node_spec* node;
    std::vector<std::string> argv;
    std::unique_ptr<apps::child_process> proc;
    size_t printed = 0;
    bool done = false;
    int rc = -1;
    restart_tracker restarts;
    std::optional<std::chrono::steady_clock::time_point> restart_at;

    void spawn(bool again = false) {
      auto args = argv;
      if (again)
        args.push_back("--restarted");
      proc = std::make_unique<apps::child_process>(args);
      printed = 0;
      restarts.started = std::chrono::steady_clock::now();
      restart_at.reset();
    }
  };
  std::vector<child> children;
  auto hosts_prefill = [&](const node_spec& n) {
    for (auto& i : c.instances)
      if (i.node == n.name && i.role == instance_role::prefill)
        return true;
    return false;
  };
  auto mode_of = [&](const node_spec& n) {
    auto m = parse_process_mode(cfg.processes);
    return m ? *m : c.processes_of(n);
  };
  bool paced = c.workload && c.workload->requests_per_second > 0;
  bool failed = false;
  children.reserve(c.nodes.size());
  for (bool first : {true, false})
    for (auto& n : c.nodes) {
      if (failed || hosts_prefill(n) != first)
        continue;
      std::vector<std::string> argv{exe,
                                    "--cluster=" + cfg.cluster,
                                    "--node=" + n.name,
                                    "--kvferry.log-level=" + cfg.log_level,
                                    "--log-format=" + cfg.log_format,
                                    "--exit-with-parent",
                                    "--parent-pid=" + std::to_string(::getpid())};
      // A paced workload counts from each node's own start unless given one
      // clock origin: nodes start one after another here, and with a shared
      // origin the later ones would skip the rooms whose time has passed.
      // Under an on-failure policy each node still gets an origin of its own,
      // but fixed here, ahead of its start by the time it takes to come up
      // (supervision.hpp), so that a restart of it takes the same origin and
      // skips the rooms whose time passed while it was down.
      auto epoch = cfg.epoch_ns;
      if (epoch == 0 && paced && n.restart.on()) {
        size_t processes = 1;
        if (mode_of(n) == process_mode::per_rank)
          for (auto& i : c.instances)
            processes += i.node == n.name ? i.tp * i.pp : 0;
        epoch = wall_ns() + origin_lead(processes).count();
      }
      if (epoch != 0)
        argv.push_back("--epoch-ns=" + std::to_string(epoch));
      if (!cfg.processes.empty())
        argv.push_back("--processes=" + cfg.processes);
      if (cfg.print_conclusions)
        argv.push_back("--print-conclusions");
      auto& ch = children.emplace_back();
      ch.node = &n;
      ch.argv = std::move(argv);
      ch.restarts.policy = n.restart;
      ch.spawn();
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
  // Stream what the nodes print, line by line, until each has exited for
  // good (or the timeout: then wait() kills it), restarting those that crash.
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds{cfg.timeout_s};
  auto flush = [&](child& ch, bool all) {
    auto& text = ch.proc->output();
    auto end = all ? text.size() : text.rfind('\n') + 1;
    if (text.rfind('\n') == std::string::npos && !all)
      return;
    if (end > ch.printed)
      print_output(ch.node->name, text.substr(ch.printed, end - ch.printed));
    ch.printed = std::max(ch.printed, end);
  };
  for (size_t left = children.size(); left > 0;) {
    bool late = std::chrono::steady_clock::now() >= until;
    bool waited = false;
    for (auto& ch : children) {
      if (ch.done)
        continue;
      if (ch.restart_at) {
        if (late) {  // its restart is not due before the timeout: it stays down
          ch.rc = -1;
          ch.done = true;
          --left;
        } else if (std::chrono::steady_clock::now() >= *ch.restart_at) {
          ch.spawn(true);
        }
        continue;
      }
      ch.proc->wait_for_line([](const std::string&) { return false; },
                             std::chrono::milliseconds{20});
      waited = true;
      flush(ch, false);
      if (!late && !ch.proc->exited())
        continue;
      ch.rc = ch.proc->wait(late ? std::chrono::milliseconds{0} : std::chrono::seconds{10});
      flush(ch, true);
      bool finished =
          ch.proc->output().find(done_line("node " + ch.node->name)) != std::string::npos;
      auto delay = !late && crashed(ch.rc, finished) ? ch.restarts.next() : std::nullopt;
      if (delay) {
        apps::say("kvferry-launch: node " + ch.node->name + " exited (" + exit_reason(ch.rc) +
                  "); " + ch.restarts.what(*delay));
        ch.restart_at = std::chrono::steady_clock::now() + *delay;
        continue;
      }
      if (!late && crashed(ch.rc, finished) && ch.restarts.policy.on())
        apps::say("kvferry-launch: node " + ch.node->name + " exited (" + exit_reason(ch.rc) +
                  "); not restarted: restart_limit " + std::to_string(ch.restarts.policy.limit) +
                  " reached");
      ch.done = true;
      --left;
    }
    if (!waited && left > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds{20});
  }
  int bad = 0;
  std::ostringstream summary;
  summary << "kvferry-launch: ";
  for (auto& ch : children) {
    summary << "node " << ch.node->name << " "
            << (ch.rc == 0  ? "ok"
                : ch.rc < 0 ? "killed (timeout)"
                            : "failed")
            << " (exit " << ch.rc;
    if (ch.restarts.restarts > 0)
      summary << ", " << ch.restarts.restarts
              << (ch.restarts.restarts == 1 ? " restart" : " restarts");
    summary << "), ";
    bad += ch.rc != 0;
  }
  if (failed)
    bad += static_cast<int>(c.nodes.size() - children.size());
  summary << c.nodes.size() << " nodes, " << bad << " failed";
  apps::say(summary.str());
  return bad == 0 && !failed ? 0 : 1;
}

}  // namespace kvferry::launch
