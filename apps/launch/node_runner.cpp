#include "apps/launch/node_runner.hpp"

#include <chrono>
#include <csignal>
#include <memory>
#include <optional>
#include <ostream>
#include <thread>
#include <vector>

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <caf/io/middleman.hpp>

#include "actors/bootstrap/bootstrap_actor.hpp"
#include "actors/decision/decider_actor.hpp"
#include "actors/facade/runtime.hpp"
#include "apps/common/host_pool.hpp"
#include "apps/common/hosted_ranks.hpp"
#include "apps/common/scheduler_driver.hpp"

namespace kvferry::launch {

namespace {

using apps::model_shape;

apps::workload workload_of(const workload_spec& s) {
  apps::workload w;
  w.seed = s.seed;
  w.rooms = s.requests;
  w.min_tokens = s.min_tokens;
  w.max_tokens = s.max_tokens;
  w.chunk_pages = s.chunk_pages;
  w.concurrency = s.concurrency;
  return w;
}

std::string at(const cluster_spec& c, uint32_t line) {
  return c.file + ":" + std::to_string(line) + ": ";
}

/// The ranks of one instance in this process.
struct running_instance {
  const instance_spec* spec = nullptr;
  apps::hosted_ranks hosted;
  bootstrap_actor boot;      // prefill
  decider_actor dec;         // decode
  bootstrap_locator source;  // decode: where its prefill's bootstrap is
  std::optional<apps::run_report> report;

  apps::instance_ranks view() const { return hosted.view(); }

  void stop() {
    hosted.stop();
    if (dec)
      caf::anon_send_exit(dec, caf::exit_reason::kill);
    if (boot)
      caf::anon_send_exit(boot, caf::exit_reason::kill);
  }
};

/// Starts every rank of `inst` (and its bootstrap or decider); false with
/// the reason printed.
bool start(caf::actor_system& sys, const cluster_spec& c, const node_spec& node,
           const workload_spec& ws, running_instance& inst, std::ostream& out, std::ostream& err) {
  auto& s = *inst.spec;
  bool prefill = s.role == instance_role::prefill;
  bootstrap_locator where{{}, node.host, s.bootstrap_port};
  if (prefill) {
    inst.boot = sys.spawn(bootstrap, s.name, fresh_generation());
    auto port = sys.middleman().publish(inst.boot, s.bootstrap_port, node.host.c_str(), true);
    if (!port) {
      err << at(c, s.bootstrap_port_line) << "bootstrap_port = " << s.bootstrap_port
          << " of instance \"" << s.name << "\": cannot listen on " << node.host << ":"
          << s.bootstrap_port << " (" << sys.render(port.error())
          << "); expected a free port on this host\n";
      return false;
    }
    out << "bootstrap of " << s.name << " listening on " << node.host << ":" << *port << std::endl;
  } else {
    auto* p = c.prefill_of(s);
    auto* pn = c.find_node(p->node);
    inst.source = bootstrap_locator{{}, pn->host, p->bootstrap_port};
    inst.dec = sys.spawn(decider, s.name, s.tp, s.pp, fresh_generation(), c.limits);
  }
  apps::ranks_spec spec;
  spec.side = prefill ? role::prefill : role::decode;
  spec.instance = s.name;
  spec.tp = s.tp;
  spec.pp = s.pp;
  // The parser admitted only known names.
  spec.shape = apps::shape_named(ws.model).value_or(apps::llama_7b());
  spec.page_size = ws.page_size;
  spec.pool_pages = ws.pool_pages;
  spec.aux_rows = ws.aux_rows;
  spec.transport = c.transport;
  spec.listen_host = node.host;
  spec.first_data_port = s.data_port;
  spec.limits = c.limits;
  if (prefill)
    spec.bootstrap = where;
  else
    spec.decider = decider_locator{inst.dec, "", 0};
  auto made = apps::start_ranks(sys, spec);
  if (!made) {
    err << at(c, s.data_port != 0 ? s.data_port_line : s.line) << "instance \"" << s.name
        << "\" rank did not start: " << sys.render(made.error()) << "\n";
    return false;
  }
  inst.hosted = std::move(*made);
  out << s.name << ": " << to_string(s.role) << " TP " << s.tp << " x PP " << s.pp << ", "
      << inst.hosted.ranks.size() << " ranks on " << c.transport << " ("
      << inst.hosted.ranks.front()->data_endpoint() << (inst.hosted.ranks.size() > 1 ? ", ..." : "")
      << ")" << std::endl;
  return true;
}

/// Waits until something accepts TCP connections at host:port (a decode node
/// may start before its prefill node); false after `timeout`.
bool wait_reachable(const std::string& host, uint16_t port, std::chrono::nanoseconds timeout) {
  auto until = std::chrono::steady_clock::now() + timeout;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  auto service = std::to_string(port);
  do {
    addrinfo* found = nullptr;
    if (getaddrinfo(host.c_str(), service.c_str(), &hints, &found) == 0) {
      bool ok = false;
      for (auto* a = found; a && !ok; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (fd < 0)
          continue;
        ok = connect(fd, a->ai_addr, a->ai_addrlen) == 0;
        close(fd);
      }
      freeaddrinfo(found);
      if (ok)
        return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds{200});
  } while (std::chrono::steady_clock::now() < until);
  return false;
}

/// Blocks until SIGINT or SIGTERM.
void wait_for_signal() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  int sig = 0;
  sigwait(&set, &sig);
}

}  // namespace

int run_node(caf::actor_system& sys, const cluster_spec& c, const std::string& node,
             std::ostream& out, std::ostream& err) {
  auto* n = c.find_node(node);
  if (!n) {
    std::string known;
    for (auto& k : c.nodes)
      known += (known.empty() ? "" : ", ") + k.name;
    err << c.file << ": --node=" << node << " names no [[node]] of the file; expected one of "
        << known << "\n";
    return 2;
  }
  // Without a workload the pools take the workload's defaults: an embedding
  // scheduler brings its own pools, this is a node to try the wiring on.
  auto ws = c.workload.value_or(workload_spec{});
  // Prefill first, so a node that hosts both serves its own decode.
  std::vector<running_instance> insts;
  for (auto r : {instance_role::prefill, instance_role::decode})
    for (auto& i : c.instances)
      if (i.node == node && i.role == r)
        insts.emplace_back().spec = &i;
  if (insts.empty()) {
    err << at(c, n->line) << "node \"" << node << "\" runs no [[instance]]\n";
    return 2;
  }
  if (!c.workload) {
    // Block the signals before CAF's threads could take them.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
  }
  int rc = 0;
  try {
    for (auto& i : insts)
      if (!start(sys, c, *n, ws, i, out, err)) {
        rc = 1;
        break;
      }
    for (auto& i : insts)
      if (rc == 0 && i.spec->role == instance_role::decode &&
          !wait_reachable(i.source.host, i.source.port, c.limits.bootstrapping)) {
        auto* p = c.prefill_of(*i.spec);
        err << at(c, p->bootstrap_port_line) << "the bootstrap of \"" << p->name << "\" at "
            << i.source.host << ":" << i.source.port << " did not answer within the bootstrap "
            << "deadline; expected its node to be running\n";
        rc = 1;
      }
    if (rc == 0 && c.workload) {
      auto w = workload_of(*c.workload);
      std::vector<std::thread> drivers;
      for (auto& i : insts)
        drivers.emplace_back([&i, &w] {
          i.report = i.spec->role == instance_role::prefill
                         ? apps::drive_prefill(i.view(), w)
                         : apps::drive_decode(i.view(), w, i.source);
        });
      for (auto& d : drivers)
        d.join();
      for (auto& i : insts) {
        out << i.spec->name << " " << i.report->to_text(to_string(i.spec->role)) << "\n";
        rc |= i.report->ok() ? 0 : 1;
      }
      out.flush();
    } else if (rc == 0) {
      out << "node " << node << " serving; SIGINT or SIGTERM stops it" << std::endl;
      wait_for_signal();
    }
  } catch (const std::exception& e) {
    err << "kvferry-launch: node " << node << ": " << e.what() << "\n";
    rc = 1;
  }
  for (auto& i : insts)
    i.stop();
  return rc;
}

}  // namespace kvferry::launch
