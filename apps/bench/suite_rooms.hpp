// Suite "rooms": one-page rooms across two processes on loopback (prefill in a
// child process, decode here), pipelined with N rooms in flight, for TP 1 -> 1
// and 4 -> 4: rooms per second, p50/p99 latency of a room, CPU microseconds
// per room on each side, beside CAF's request round trip in the same run.
#pragma once

#include "apps/bench/bench_args.hpp"

namespace kvferry::bench {

/// The suite, run by the parent process (the decode side).
int run_rooms_suite(const args& a);

/// Peer "rooms-prefill": a bootstrap and the prefill ranks of one
/// configuration; serves the warm-up and the measured rooms, then prints its
/// own CPU time over the measured ones.
int run_rooms_prefill_peer(const args& a);

}  // namespace kvferry::bench
