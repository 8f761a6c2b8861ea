// Suite "tcp": the tcp backend against a raw TCP stream between the same two
// processes (tcp_bandwidth), and one small room end to end across two
// processes against CAF's own request round trip (room_latency_us).
#pragma once

#include "apps/bench/bench_args.hpp"

namespace kvferry::bench {

/// The suite, run by the parent process.
int run_tcp_suite(const args& a);

/// Peer "tcp-sink": a tcp transport receiving into a KV-shaped pool, and a raw
/// TCP listener reading the baseline stream into the same memory.
int run_tcp_sink_peer(const args& a);

/// Peer "prefill-rooms": a bootstrap and a prefill rank serving small rooms.
int run_prefill_rooms_peer(const args& a);

}  // namespace kvferry::bench
