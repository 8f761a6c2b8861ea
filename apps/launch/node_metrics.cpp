#include "apps/launch/node_metrics.hpp"

#include <unistd.h>

#include <set>
#include <vector>

#include <caf/scoped_actor.hpp>

#include "actors/metrics/exposition.hpp"

namespace kvferry::launch {

metric_family node_ranks_family(const node_status& s) {
  size_t up = 0;
  size_t reported_down = 0;
  for (auto& h : s.ranks)
    (h.up ? up : reported_down) += 1;
  size_t down =
      s.expected.empty() ? reported_down : (s.expected.size() > up ? s.expected.size() - up : 0);
  metric_family f{"kvferry_node_ranks",
                  "Ranks of the node up (reporting, their actor alive) and down (or not reported "
                  "yet)",
                  "gauge",
                  {}};
  for (auto [state, n] : {std::pair{"up", up}, std::pair{"down", down}})
    f.samples.push_back(f.name + metrics::render_labels({{"node", s.node}, {"state", state}}) +
                        " " + std::to_string(n));
  return f;
}

std::string node_metrics(caf::actor_system& sys, const status_actor& status,
                         metrics::registry& here, std::chrono::milliseconds wait) {
  std::vector<std::vector<metric_family>> parts;
  parts.push_back(here.collect());
  if (status) {
    caf::scoped_actor self{sys};
    self->request(status, wait, status_atom_v)
        .receive(
            [&](node_status& s) {
              parts.push_back({node_ranks_family(s)});
              // Each child process's figures once (a process reports each of
              // its ranks with the same figures); this process's are `here`.
              std::set<int32_t> seen{static_cast<int32_t>(::getpid())};
              for (auto& h : s.ranks)
                if (!h.last.metrics.empty() && seen.insert(h.last.pid).second)
                  parts.push_back(h.last.metrics);
            },
            [](caf::error&) {});
  }
  return metrics::render(metrics::merge(parts));
}

}  // namespace kvferry::launch
