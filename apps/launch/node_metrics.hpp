// What a node's /metrics serves: the figures of this process's registry (its
// ranks, deciders, process), those its per-rank children last reported to the
// node's status actor, and how many of the node's ranks are up and down, in
// one Prometheus exposition.
#pragma once

#include <chrono>
#include <string>

#include <caf/actor_system.hpp>

#include "actors/metrics/registry.hpp"
#include "messages/node_status.hpp"

namespace kvferry::launch {

/// kvferry_node_ranks of `s`: the ranks that report and are up, and the
/// others it expects (down, or not reported yet).
metric_family node_ranks_family(const node_status& s);

/// The exposition text. Asks `status` (a request from a scoped actor of
/// `sys`, at most `wait`); when it does not answer, serves this process's
/// figures alone.
std::string node_metrics(caf::actor_system& sys, const status_actor& status,
                         metrics::registry& here,
                         std::chrono::milliseconds wait = std::chrono::milliseconds{2000});

}  // namespace kvferry::launch
