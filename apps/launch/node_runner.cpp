#include "apps/launch/node_runner.hpp"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <sstream>
#include <thread>
#include <vector>

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <caf/io/middleman.hpp>

#include "actors/base/log.hpp"
#include "actors/base/log_json.hpp"
#include "actors/bootstrap/bootstrap_actor.hpp"
#include "actors/decision/decider_actor.hpp"
#include "actors/facade/runtime.hpp"
#include "actors/gateway/tls.hpp"
#include "actors/metrics/process_figures.hpp"
#include "actors/process/caf_port_guard.hpp"
#include "apps/common/child_process.hpp"
#include "apps/common/host_pool.hpp"
#include "apps/common/hosted_ranks.hpp"
#include "apps/common/scheduler_driver.hpp"
#include "apps/common/whole_lines.hpp"
#include "apps/launch/http_endpoint.hpp"
#include "apps/launch/instance_drive.hpp"
#include "apps/launch/instance_start.hpp"
#include "apps/launch/line_printer.hpp"
#include "apps/launch/node_metrics.hpp"
#include "apps/launch/rank_children.hpp"
#include "apps/launch/status_actor.hpp"
#include "apps/launch/stop_signals.hpp"
#include "apps/launch/supervision.hpp"
#include "messages/type_ids.hpp"
#include "messages/wall_clock.hpp"

namespace kvferry::launch {

namespace {

using clock_type = std::chrono::steady_clock;

/// Serves the ranks of `insts` until SIGINT or SIGTERM; reports an
/// instance's ranks again when their generation changed (it may be issued
/// after they started), and every second where the reports carry the
/// process's figures (a per-rank child).
void serve(const std::vector<const running_instance*>& insts, const status_actor& status) {
  auto generations = [](const running_instance& inst) {
    std::vector<uint64_t> out;
    for (auto& r : inst.hosted.ranks)
      out.push_back(generation_of(*r));
    return out;
  };
  std::vector<std::vector<uint64_t>> seen;
  for (auto* i : insts)
    seen.push_back(generations(*i));
  while (!took_signal(std::chrono::seconds{1}))
    for (size_t k = 0; k < insts.size(); ++k)
      if (auto now = generations(*insts[k]); now != seen[k] || insts[k]->report_metrics) {
        seen[k] = std::move(now);
        report_to(status, *insts[k], nullptr, 0, false);
      }
}

/// --linger: the workload is done; status and /metrics stay up until
/// SIGINT or SIGTERM.
void linger(const std::string& node, printer& p) {
  p.line("node " + node + " lingers: status and metrics stay up; SIGINT or SIGTERM stops it");
  while (!took_signal(std::chrono::seconds{1})) {
  }
}

/// A per-rank child: hosts rank opts.rank of its instance, reports to the
/// node's status actor, drives the rank's share of the workload.
int run_rank_child(caf::actor_system& sys, const cluster_spec& c, const node_spec& node,
                   const node_options& opts, printer& p, std::ostream& err) {
  auto slash = opts.rank.rfind('/');
  auto* s = slash == std::string::npos ? nullptr : c.find_instance(opts.rank.substr(0, slash));
  if (!s || s->node != node.name) {
    err << c.file << ": --rank=" << opts.rank << " names no instance of node " << node.name
        << "; expected INSTANCE/INDEX\n";
    return 2;
  }
  running_instance inst;
  inst.spec = s;
  inst.indices = {static_cast<uint32_t>(std::stoul(opts.rank.substr(slash + 1)))};
  inst.metrics = std::make_shared<metrics::registry>();
  inst.report_metrics = true;
  metrics::watch_process(*inst.metrics, {{"node", node.name}, {"process", opts.rank}});
  watch_caf_ports(*inst.metrics, {{"node", node.name}, {"process", opts.rank}});
  if (!c.workload)
    block_stop_signals();  // main() did it before CAF's threads; again does no harm
  status_actor status;
  if (opts.parent_status_port != 0) {
    auto found = find_published<status_actor>(sys, node.host, opts.parent_status_port,
                                              std::chrono::seconds{10});
    if (found)
      status = *found;
    else
      err << "kvferry-launch: rank " << opts.rank << ": no status actor at " << node.host << ":"
          << opts.parent_status_port << " (" << sys.render(found.error()) << ")\n";
  }
  int rc = 0;
  try {
    if (!start_ranks_here(sys, c, node, opts, inst, p, err))
      return 1;
    report_to(status, inst, nullptr, 0, false);
    p.line("rank " + opts.rank + " up on " + inst.hosted.ranks.front()->data_endpoint() + " (pid " +
           std::to_string(::getpid()) + ")");
    if (c.workload) {
      drive(c, opts, opts.epoch_ns, inst, status, p);
      rc = inst.report->ok() ? 0 : 1;
      // Tells the node process this exit is the workload's result, not a
      // crash (supervision.hpp).
      p.line(done_line("rank " + opts.rank));
    } else {
      serve({&inst}, status);
    }
  } catch (const std::exception& e) {
    err << "kvferry-launch: rank " << opts.rank << ": " << e.what() << "\n";
    rc = 1;
  }
  inst.stop();
  return rc;
}

}  // namespace

int run_node(caf::actor_system& sys, const cluster_spec& c, const std::string& node,
             const node_options& opts, std::ostream& out, std::ostream& err) {
  auto* n = c.find_node(node);
  if (!n) {
    std::string known;
    for (auto& k : c.nodes)
      known += (known.empty() ? "" : ", ") + k.name;
    err << c.file << ": --node=" << node << " names no [[node]] of the file; expected one of "
        << known << "\n";
    return 2;
  }
  printer p{out};
  if (!opts.rank.empty())
    return run_rank_child(sys, c, *n, opts, p, err);
  auto mode = opts.processes.value_or(c.processes_of(*n));
  bool per_rank = mode == process_mode::per_rank;
  // Prefill first, so a node that hosts both serves its own decode.
  std::vector<running_instance> insts;
  std::vector<std::string> expected;
  for (auto r : {instance_role::prefill, instance_role::decode})
    for (auto& i : c.instances)
      if (i.node == node && i.role == r) {
        auto& ri = insts.emplace_back();
        ri.spec = &i;
        for (uint32_t k = 0; k < i.tp * i.pp; ++k) {
          expected.push_back(i.name + "/" + std::to_string(k));
          if (!per_rank)
            ri.indices.push_back(k);
        }
      }
  if (insts.empty()) {
    err << at(c, n->line) << "node \"" << node << "\" runs no [[instance]]\n";
    return 2;
  }
  if (!c.workload)
    block_stop_signals();      // main() did it before CAF's threads; again does no harm
  auto epoch = opts.epoch_ns;  // 0: each driving process counts from its own start
  auto figures = std::make_shared<metrics::registry>();
  metrics::watch_process(*figures, {{"node", node}, {"process", "node " + node}});
  watch_caf_ports(*figures, {{"node", node}, {"process", "node " + node}});
  for (auto& i : insts)
    i.metrics = figures;
  auto metrics_at =
      n->metrics_port == 0 ? std::string{} : n->host + ":" + std::to_string(n->metrics_port);
  auto status =
      sys.spawn(node_status_actor, node, std::string{to_string(mode)}, expected, metrics_at);
  auto status_port = publish_actor(sys, status, n->status_port, n->host);
  if (!status_port) {
    err << at(c, n->status_port_line ? n->status_port_line : n->line)
        << "status_port = " << n->status_port << " of node \"" << node << "\": cannot listen on "
        << n->host << ":" << n->status_port << " (" << sys.render(status_port.error())
        << "); expected a free port on this host\n";
    caf::anon_send_exit(status, caf::exit_reason::kill);
    return 1;
  }
  p.line("status of node " + node + " listening on " + n->host + ":" +
         std::to_string(*status_port) + " (" + to_string(mode) + " processes)");
  std::unique_ptr<http_endpoint> metrics_endpoint;
  if (n->metrics_port != 0) {
    auto ep = http_endpoint::start(n->host, n->metrics_port, [&sys, status, figures] {
      return node_metrics(sys, status, *figures);
    });
    if (!ep) {
      err << at(c, n->metrics_port_line) << "metrics_port = " << n->metrics_port << " of node \""
          << node << "\": " << sys.render(ep.error()) << "\n";
      caf::anon_send_exit(status, caf::exit_reason::kill);
      return 1;
    }
    metrics_endpoint = std::move(*ep);
    p.line("metrics of node " + node + " at http://" + metrics_at + "/metrics");
  }
  int rc = 0;
  std::vector<rank_child> children;
  try {
    for (auto& i : insts) {
      if (!start_coordinator(sys, c, *n, per_rank, i, p, err) ||
          (!per_rank && !start_ranks_here(sys, c, *n, opts, i, p, err))) {
        rc = 1;
        break;
      }
      if (!per_rank)
        report_to(status, i, nullptr, 0, false);
    }
    for (auto& i : insts)
      if (rc == 0 && i.spec->role == instance_role::decode)
        for (auto& name : i.spec->prefills) {
          auto* pi = c.find_instance(name);
          auto where = bootstrap_of(c, *pi);
          if (!wait_reachable(where.host, where.port, c.limits.bootstrapping)) {
            err << at(c, pi->bootstrap_port_line) << "the bootstrap of \"" << pi->name << "\" at "
                << where.host << ":" << where.port << " did not answer within the bootstrap "
                << "deadline; expected its node to be running\n";
            rc = 1;
          }
        }
    if (rc == 0 && per_rank && epoch == 0 && n->restart.on() && c.workload &&
        c.workload->requests_per_second > 0) {
      // A restarted child must count from the origin of the one it replaces,
      // and skip the rooms whose time has passed: fix one for all children,
      // ahead of their starts (supervision.hpp). Without restarts each child
      // keeps its own, as before.
      size_t ranks = 0;
      for (auto& i : insts)
        ranks += i.spec->tp * i.spec->pp;
      epoch = wall_ns() + origin_lead(ranks).count();
    }
    if (rc == 0 && per_rank)
      for (auto& i : insts)
        if (!start_children(c, *n, opts, *status_port, epoch, *i.spec, i.decider_port, children, p,
                            err)) {
          rc = 1;
          break;
        }
    if (rc == 0 && per_rank) {
      if (!c.workload)
        p.line("node " + node + " serving; SIGINT or SIGTERM stops it");
      rc = supervise_children(children, !c.workload, status, p);
      if (c.workload)
        p.line(done_line("node " + node));
      if (c.workload && opts.linger)
        linger(node, p);
    } else if (rc == 0 && c.workload) {
      std::vector<std::thread> drivers;
      for (auto& i : insts)
        drivers.emplace_back([&, ip = &i] { drive(c, opts, epoch, *ip, status, p); });
      for (auto& d : drivers)
        d.join();
      for (auto& i : insts)
        rc |= i.report->ok() ? 0 : 1;
      p.line(done_line("node " + node));  // for --local's supervision (supervision.hpp)
      if (opts.linger)
        linger(node, p);
    } else if (rc == 0) {
      p.line("node " + node + " serving; SIGINT or SIGTERM stops it");
      std::vector<const running_instance*> here;
      for (auto& i : insts)
        here.push_back(&i);
      serve(here, status);
    }
  } catch (const std::exception& e) {
    err << "kvferry-launch: node " << node << ": " << e.what() << "\n";
    rc = 1;
  }
  // Children that run now (not those waiting for a restart: reaped already).
  for (auto& ch : children)
    if (!ch.done && !ch.restart_at)
      ::kill(ch.proc->pid(), SIGTERM);
  for (auto& ch : children)
    if (!ch.done && !ch.restart_at) {
      ch.proc->wait(std::chrono::seconds{10});
      relay(ch, p, true);
    }
  for (auto& i : insts)
    i.stop();
  caf::anon_send_exit(status, caf::exit_reason::kill);
  return rc;
}

}  // namespace kvferry::launch
