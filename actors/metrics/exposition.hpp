// Prometheus' text exposition format (version 0.0.4) of the families of one
// or more processes: a node serves its own registry and, for per-rank child
// processes, the families their last reports carried. Families of the same
// name are merged (one HELP and TYPE, then every sample); a sample line
// another process already gave (the same series twice) is written once.
#pragma once

#include <string>
#include <vector>

#include "messages/metric_family.hpp"

namespace kvferry::metrics {

/// The Content-Type of render()'s text.
inline constexpr const char* exposition_content_type = "text/plain; version=0.0.4; charset=utf-8";

/// Merges `parts` by family name, keeping the first HELP and TYPE, and
/// drops a family whose TYPE differs from the first one's.
std::vector<metric_family> merge(const std::vector<std::vector<metric_family>>& parts);

/// "# HELP ...\n# TYPE ...\nSAMPLE\n..." for each family, by name.
std::string render(const std::vector<metric_family>& families);

}  // namespace kvferry::metrics
