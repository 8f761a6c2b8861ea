// Suite "checksum": what end-to-end KV checksums cost. The same rooms move
// with the decode instance checking XXH3 digests of every chunk and without,
// in one run, on each data plane asked for (--transports=shm,tcp), both
// instances in this process (pattern bytes, verified on every decode rank).
//   checksum_bandwidth: GB/s of KV moved with checksums, baseline without,
//     per transport and TP mapping (1 -> 1 and 2 -> 2: whole pages; 1 -> 2:
//     head slices, staged).
// Options: --model=llama-7b (a named shape), --rooms=N, --min-tokens,
// --max-tokens, --chunk-pages=N, --reps=N, --quick.
#pragma once

#include "apps/bench/bench_args.hpp"

namespace kvferry::bench {

int run_checksum_suite(const args& a);

}  // namespace kvferry::bench
