// Suite "failover": how long a lost prefill rank takes to become one verdict
// on every surviving rank, with real processes on 127.0.0.1 (TP 2 -> 2, one
// process per prefill rank). kill_to_all_failed_p50_ms / _p99_ms: from a
// kill -9 of one prefill rank process to the last surviving rank's
// conclusion of the rooms that were live, over repeated kills;
// partition_to_all_failed_p99_ms: the same with SIGSTOP (no connection
// drops: only heartbeats can tell). Baseline: the configured heartbeat
// silence (interval x misses), what detection by heartbeats alone costs.
#pragma once

#include "apps/bench/bench_args.hpp"

namespace kvferry::bench {

int run_failover_suite(const args& a);

}  // namespace kvferry::bench
