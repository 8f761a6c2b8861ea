#include "apps/ctl/cluster_status.hpp"

#include <map>
#include <ostream>

#include <caf/actor_cast.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>

#include "actors/gateway/tls.hpp"
#include "messages/ids.hpp"
#include "messages/type_ids.hpp"

namespace kvferry::ctl {

namespace {

using namespace kvferry::launch;

std::string where(const std::string& host, uint16_t port) {
  return host + ":" + std::to_string(port);
}

std::string states(const std::map<std::string, uint32_t>& m) {
  std::string out;
  for (auto& [k, n] : m)
    out += (out.empty() ? "" : " ") + k + "=" + std::to_string(n);
  return out.empty() ? "none" : out;
}

/// "restarts 2 (last: killed by signal 9), generation 1733051234000000000".
std::string supervision(const rank_health& r) {
  std::string out = "restarts " + std::to_string(r.restarts);
  if (!r.last_exit.empty())
    out += " (last: " + r.last_exit + (r.given_up ? "; not restarted" : "") + ")";
  out += ", generation ";
  out += r.last.generation != 0 ? std::to_string(r.last.generation) : "- (none issued yet)";
  return out;
}

}  // namespace

std::set<std::string> peers_of(const cluster_spec& c, const std::string& node) {
  std::set<std::string> out{node};
  for (auto& i : c.instances) {
    if (i.node != node || i.role != instance_role::decode)
      continue;
    for (auto& p : i.prefills)
      if (auto* pi = c.find_instance(p))
        out.insert(pi->node);
  }
  return out;
}

cluster_view gather(caf::actor_system& sys, const cluster_spec& c,
                    const std::set<std::string>& nodes, caf::timespan timeout) {
  cluster_view v;
  caf::scoped_actor self{sys};
  for (auto& n : c.nodes) {
    if (!nodes.empty() && !nodes.count(n.name))
      continue;
    node_answer a;
    a.node = &n;
    if (n.status_port == 0) {
      a.error = "no status_port in the file";
    } else if (auto h = find_published<status_actor>(sys, n.host, n.status_port, timeout); !h) {
      a.error = "unreachable at " + where(n.host, n.status_port) + ": " + sys.render(h.error());
    } else {
      self->request(*h, timeout, status_atom_v)
          .receive([&](node_status& s) { a.status = std::move(s); },
                   [&](caf::error& e) { a.error = "no answer: " + sys.render(e); });
    }
    v.nodes.push_back(std::move(a));
  }
  for (auto& i : c.instances) {
    if (i.role != instance_role::prefill || (!nodes.empty() && !nodes.count(i.node)))
      continue;
    bootstrap_answer b;
    b.instance = &i;
    auto& host = c.find_node(i.node)->host;
    if (auto h = find_published<bootstrap_actor>(sys, host, i.bootstrap_port, timeout); !h) {
      b.error = "unreachable at " + where(host, i.bootstrap_port) + ": " + sys.render(h.error());
    } else {
      self->request(*h, timeout, topology_atom_v)
          .receive([&](topology& t) { b.topo = std::move(t); },
                   [&](caf::error& e) { b.error = "no answer: " + sys.render(e); });
    }
    v.bootstraps.push_back(std::move(b));
  }
  return v;
}

bool healthy(const cluster_view& v) {
  for (auto& a : v.nodes) {
    if (!a.status)
      return false;
    std::set<std::string> up;
    for (auto& r : a.status->ranks)
      if (r.up)
        up.insert(r.last.instance + "/" + std::to_string(r.last.index));
    for (auto& e : a.status->expected)
      if (!up.count(e))
        return false;
  }
  for (auto& b : v.bootstraps)
    if (!b.topo || !b.topo->complete())
      return false;
  return true;
}

void print(std::ostream& out, const cluster_spec& c, const cluster_view& v) {
  size_t answered = 0, ranks_up = 0, ranks_expected = 0;
  std::map<std::string, uint32_t> rooms;  // by state, over instances
  std::vector<std::string> failures;
  for (auto& a : v.nodes) {
    auto& n = *a.node;
    out << "node " << n.name << " (" << n.host << "): ";
    if (!a.status) {
      out << "UNREACHABLE: " << a.error << "\n";
      for (auto& i : c.instances)
        if (i.node == n.name)
          ranks_expected += i.tp * i.pp;
      continue;
    }
    ++answered;
    auto& s = *a.status;
    out << "up, pid " << s.pid << ", " << s.mode << " processes, " << s.ranks.size() << "/"
        << s.expected.size() << " ranks reported, metrics "
        << (s.metrics.empty() ? std::string{"off (no metrics_port)"}
                              : "at http://" + s.metrics + "/metrics")
        << "\n";
    ranks_expected += s.expected.size();
    std::set<std::string> reported;
    std::set<std::string> counted;  // instances whose rooms were added
    for (auto& r : s.ranks) {
      auto name = r.last.instance + "/" + std::to_string(r.last.index);
      reported.insert(name);
      ranks_up += r.up;
      out << "  " << name << "  " << r.last.rank << "  " << (r.up ? "up" : "DOWN") << "  pid "
          << r.last.pid << "  " << r.last.endpoint;
      if (!r.up)
        out << "  (" << r.down_reason << ")";
      out << "\n      " << supervision(r);
      if (r.last.rooms > 0)
        out << "\n      rooms: " << r.last.success << "/" << r.last.rooms << " Success, "
            << r.last.failed << " Failed, in flight: " << states(r.last.in_flight)
            << (r.last.finished ? " (workload done)" : "");
      out << "\n";
      // One scheduler per instance and process: count an instance's rooms
      // once per process (per-rank processes each count their own rank).
      if (s.mode == "per-rank" || counted.insert(r.last.instance).second) {
        if (s.mode == "per-rank" && r.last.index != 0)
          continue;
        rooms["Success"] += r.last.success;
        rooms["Failed"] += r.last.failed;
        for (auto& [k, m] : r.last.in_flight)
          rooms[k] += m;
        for (auto& f : r.last.failures)
          failures.push_back(r.last.instance + ": " + f);
      }
    }
    for (auto& e : s.expected)
      if (!reported.count(e))
        out << "  " << e << "  NOT REPORTED (its process has not started or did not reach "
            << "the status actor)\n";
  }
  for (auto& b : v.bootstraps) {
    auto& i = *b.instance;
    out << "bootstrap of " << i.name << " (" << c.find_node(i.node)->host << ":" << i.bootstrap_port
        << "): ";
    if (!b.topo) {
      out << "UNREACHABLE: " << b.error << "\n";
      continue;
    }
    out << b.topo->ranks.size() << "/" << size_t{b.topo->tp_size} * b.topo->pp_size
        << " ranks registered, generation " << b.topo->instance_generation
        << (b.topo->complete() ? "" : " (INCOMPLETE)") << "\n";
    for (auto& r : b.topo->ranks)
      out << "  " << to_string(r.rank) << "  " << r.data_endpoint << "\n";
  }
  out << "rooms by state: " << states(rooms) << "\n";
  if (!failures.empty()) {
    out << "latest failures:\n";
    for (auto& f : failures)
      out << "  " << f << "\n";
  }
  out << "summary: " << answered << "/" << v.nodes.size() << " nodes answer, " << ranks_up << "/"
      << ranks_expected << " ranks up, " << (healthy(v) ? "healthy" : "UNHEALTHY") << "\n";
}

}  // namespace kvferry::ctl
