// DP attention in the cluster file: `dp = N` on an instance, read and
// checked, and the instance split into its N groups, each an instance of its
// own to the runtime (actors/plan/dp_groups.hpp): its own bootstrap or
// decider, and only its ranks hear of its rooms.
#pragma once

#include <toml++/toml.h>

#include "apps/common/cluster_spec.hpp"
#include "apps/common/toml_reader.hpp"

namespace kvferry::launch::toml_reading {

/// Reads `dp` of instance table `t` into `s` (default 1); false, with the
/// error recorded at its line, for a dp out of range or one that does not
/// divide tp.
bool read_dp(reader& r, const toml::table& t, instance_spec& s);

/// Replaces every instance of dp > 1 with its groups, in place and in file
/// order, and every decode instance's prefill name of a split instance with
/// the names of all its groups. Records an error when the groups' ports run
/// past 65535 or their names collide with another instance.
void split_dp_groups(reader& r, cluster_spec& c);

}  // namespace kvferry::launch::toml_reading
