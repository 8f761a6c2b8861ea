// Suite "staging": the staging ring against the head-sliced path, for MHA
// with different TP sizes (4 -> 1 and 1 -> 4), both instances in this
// process on the default data plane (auto: shm on one host). Each path moves
// the same rooms (pattern bytes, verified on every decode rank).
//   writes_per_request_ratio: the sliced path's transport writes per request
//     divided by staging's (one bulk write per chunk and writer, plus the
//     aux row), counted by the prefill ranks' transfer actors;
//   staging_bandwidth: GB/s of KV moved with staging, baseline the sliced
//     path in the same run.
// Options: --model=llama-7b (a named shape), --rooms=N, --tokens=MIN..MAX
// (as --min-tokens/--max-tokens), --chunk-pages=N, --transport=auto|tcp|shm,
// --reps=N.
#pragma once

#include "apps/bench/bench_args.hpp"

namespace kvferry::bench {

int run_staging_suite(const args& a);

}  // namespace kvferry::bench
