// Moving a workload between two instances of this process through the
// runtime, for the suites that compare paths of it (staging, checksum): rooms
// of pattern bytes, verified on every decode rank.
#pragma once

#include <cstdint>

#include "actors/plan/kv_digest.hpp"
#include "apps/bench/bench_args.hpp"
#include "apps/common/host_pool.hpp"

namespace kvferry::bench {

struct path_run {
  double seconds = 0;
  uint64_t bytes = 0;  ///< KV and aux landed on the decode ranks
  uint64_t writes = 0;
  uint64_t chunks = 0;
  uint64_t staged = 0;
  uint32_t rooms = 0;
  double gbps() const { return seconds > 0 ? bytes / seconds / 1e9 : 0; }
};

/// How one run moves its rooms.
struct path_choice {
  bool staging = true;                      ///< heterogeneous TP through the staging ring
  kv_checksum checksum = kv_checksum::off;  ///< decode checks end-to-end digests
};

/// Moves the workload (--rooms, --min-tokens, --max-tokens, --chunk-pages,
/// --transport of `a`) from a prefill instance of TP `p` to a decode
/// instance of TP `d`; throws if a room fails or a byte differs.
path_run move_rooms(const args& a, const apps::model_shape& shape, uint32_t p, uint32_t d,
                    path_choice how);

}  // namespace kvferry::bench
