// Suite "cuda": staging's gather and scatter as one segment-copy kernel launch
// (transport/cuda/cuda_segment_copy.hpp) against cudaMemcpy device to device
// of the same bytes, and the pinned bounce pipeline against cudaMemcpy between
// device and pinned host memory. Without a GPU (or without nvcc at build time)
// it prints one line saying it skipped and why, and exits 0.
#pragma once

#include "apps/bench/bench_args.hpp"

namespace kvferry::bench {

/// The suite: --tokens=N (64) rows per layer and K/V of the KV-shaped lists,
/// --bounce-bytes=B (256 MiB) through the bounce pipeline, --iters=N (100)
/// launches per timed repetition.
int run_cuda_suite(const args& a);

}  // namespace kvferry::bench
