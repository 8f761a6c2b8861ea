// One metric family as a process renders it for Prometheus: what a per-rank
// child process hands its node (in its rank_report), so that the node's
// /metrics serves the figures of every process it runs in one exposition.
// Filled by actors/metrics/registry.hpp; merged and written out by
// actors/metrics/exposition.hpp.
#pragma once

#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>

namespace kvferry {

struct metric_family {
  std::string name;  ///< "kvferry_rooms_total"
  std::string help;
  std::string type;                  ///< "counter", "gauge" or "histogram"
  std::vector<std::string> samples;  ///< whole sample lines, "NAME{LABELS} VALUE", no newline

  friend bool operator==(const metric_family&, const metric_family&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, metric_family& x) {
  return f(caf::meta::type_name("kvferry.metric_family"), x.name, x.help, x.type, x.samples);
}

}  // namespace kvferry
