#include "apps/launch/instance_start.hpp"

#include <thread>

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <caf/io/middleman.hpp>

#include "actors/base/log.hpp"
#include "actors/facade/runtime.hpp"
#include "actors/gateway/tls.hpp"
#include "actors/process/caf_port_guard.hpp"
#include "apps/common/host_pool.hpp"
#include "messages/type_ids.hpp"

namespace kvferry::launch {

using clock_type = std::chrono::steady_clock;

std::string at(const cluster_spec& c, uint32_t line) {
  return c.file + ":" + std::to_string(line) + ": ";
}

bootstrap_locator bootstrap_of(const cluster_spec& c, const instance_spec& prefill) {
  return bootstrap_locator{{}, c.find_node(prefill.node)->host, prefill.bootstrap_port};
}

/// Spawns and publishes the bootstrap (prefill) or spawns the decider
/// (decode; published too when its ranks live in child processes).
bool start_coordinator(caf::actor_system& sys, const cluster_spec& c, const node_spec& node,
                       bool per_rank, running_instance& inst, printer& p, std::ostream& err) {
  auto& s = *inst.spec;
  if (s.role == instance_role::prefill) {
    inst.boot = sys.spawn(bootstrap_on, s.name, fresh_generation(),
                          node.host + ":" + std::to_string(s.bootstrap_port), node.name);
    auto port = publish_actor(sys, inst.boot, s.bootstrap_port, node.host);
    if (!port) {
      err << at(c, s.bootstrap_port_line) << "bootstrap_port = " << s.bootstrap_port
          << " of instance \"" << s.name << "\": cannot listen on " << node.host << ":"
          << s.bootstrap_port << " (" << sys.render(port.error())
          << "); expected a free port on this host\n";
      return false;
    }
    p.line("bootstrap of " + s.name + " listening on " + node.host + ":" + std::to_string(*port));
    return true;
  }
  inst.dec = sys.spawn(decider_on, s.name, s.tp, s.pp, fresh_generation(), c.limits, node.name,
                       inst.metrics);
  if (per_rank) {
    auto port = publish_actor(sys, inst.dec, 0, node.host);
    if (!port) {
      err << at(c, node.line) << "node \"" << node.name << "\": cannot publish the decider of \""
          << s.name << "\" on " << node.host << " (" << sys.render(port.error()) << ")\n";
      return false;
    }
    inst.decider_port = *port;
  }
  return true;
}

/// Starts the ranks `indices` of `inst` in this process.
bool start_ranks_here(caf::actor_system& sys, const cluster_spec& c, const node_spec& node,
                      const node_options& opts, running_instance& inst, printer& p,
                      std::ostream& err) {
  auto& s = *inst.spec;
  auto ws = c.workload.value_or(workload_spec{});
  apps::ranks_spec spec;
  spec.side = s.role == instance_role::prefill ? role::prefill : role::decode;
  spec.instance = s.name;
  spec.tp = s.tp;
  spec.pp = s.pp;
  spec.hosted = {inst.indices.begin(), inst.indices.end()};
  // The parser admitted only known names.
  spec.shape = apps::shape_named(ws.model).value_or(apps::llama_7b());
  spec.page_size = ws.page_size;
  spec.pool_pages = ws.pool_pages;
  spec.aux_rows = ws.aux_rows;
  spec.transport = c.transport;
  spec.listen_host = node.host;
  spec.first_data_port = s.data_port;
  spec.limits = c.limits;
  spec.staging = c.staging;
  spec.checksum = s.checksum;
  spec.metrics = inst.metrics;
  if (s.role == instance_role::prefill)
    spec.bootstrap = bootstrap_of(c, s);
  else if (inst.dec)
    spec.decider = decider_locator{inst.dec, "", 0};
  else
    spec.decider = decider_locator{{}, node.host, opts.decider_port};
  auto made = apps::start_ranks(sys, spec);
  if (!made) {
    err << at(c, s.data_port != 0 ? s.data_port_line : s.line) << "instance \"" << s.name
        << "\" rank did not start: " << sys.render(made.error()) << "\n";
    return false;
  }
  inst.hosted = std::move(*made);
  std::string endpoints;
  for (auto& r : inst.hosted.ranks)
    endpoints += (endpoints.empty() ? "" : ", ") + r->data_endpoint();
  p.line(s.name + ": " + to_string(s.role) + " TP " + std::to_string(s.tp) + " x PP " +
         std::to_string(s.pp) + ", " + std::to_string(inst.hosted.ranks.size()) +
         (inst.hosted.ranks.size() == 1 ? " rank" : " ranks") + " here on " + c.transport + " (" +
         endpoints + ")");
  return true;
}

/// Waits until something accepts TCP connections at host:port (a decode node
/// may start before its prefill node); false after `timeout`.
bool wait_reachable(const std::string& host, uint16_t port, std::chrono::nanoseconds timeout) {
  auto until = clock_type::now() + timeout;
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
  } while (clock_type::now() < until);
  return false;
}

}  // namespace kvferry::launch
