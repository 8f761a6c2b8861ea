// Suite "transports": each host backend against the machine's own limit in the
// same run. shm_kv_bandwidth (baseline: memcpy of the same ops by one thread)
// and tcp_kv_bandwidth (baseline: a raw TCP stream of the same bytes) for a
// KV-shaped workload, then both per write size from 4 KiB to 16 MiB, beside
// ucx_perftest's put bandwidth over UCX's tcp and posix transports when that
// binary is installed.
#pragma once

#include "apps/bench/bench_args.hpp"

namespace kvferry::bench {

/// The suite, run by the parent process. --table=PATH also writes the per-size
/// figures as a whitespace table for apps/bench/plot_transports.gp.
int run_transports_suite(const args& a);

/// Peer "transport-sink": a transport of --backend receiving into a KV-shaped
/// pool of --pages pages and a flat region of --flat bytes (registered after
/// the pool's buffers), and, for tcp, a raw TCP listener for the baseline.
int run_transport_sink_peer(const args& a);

}  // namespace kvferry::bench
