// The cluster file's cross-checks, run once every table parsed: decode and
// prefill instances that pair (names, PP sizes, TP head splits), ports that
// no two listeners share, and instances the workload never reaches. Each
// failure is recorded with the line of the value at fault.
#pragma once

#include <toml++/toml.h>

#include "apps/common/cluster_spec.hpp"
#include "apps/common/toml_reader.hpp"

namespace kvferry::launch::toml_reading {

/// Every decode instance names prefill instances that exist, with its PP size.
void check_pairs(reader& r, const toml::table& root, cluster_spec& c);
/// The workload's model splits over every instance's TP size.
void check_heads(reader& r, const toml::table& root, const cluster_spec& c);
/// Instance `i` takes part in at least one room of the workload.
bool takes_part(const cluster_spec& c, const instance_spec& i);
/// No two listeners of one host share a port.
void check_ports(reader& r, cluster_spec& c);

}  // namespace kvferry::launch::toml_reading
