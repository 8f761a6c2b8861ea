// What the bandwidth suites share: peers started from this binary, KV-shaped
// rounds of batches through a transport (random page orders on both sides),
// and the raw TCP stream used as the baseline of the tcp backend.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <random>
#include <string>

#include "apps/common/host_pool.hpp"
#include "messages/layout.hpp"
#include "transport/transport.hpp"

namespace kvferry::bench {

/// The KV shape of the bandwidth figures: a 7B model's pages (128 KiB per page
/// and buffer, 64 buffers).
apps::model_shape bandwidth_shape();

/// The layout of a host_pool whose buffers were registered in order (ids 1..n).
kv_layout registered_layout(const apps::host_pool& pool);

/// Registers every buffer of `pool` in order (ids 1..n); throws on a refusal.
void register_pool(transport::transport& net, const apps::host_pool& pool);

/// Path of this executable (peers re-execute it).
std::string self_exe();

/// Blocks until the parent closes our stdin.
void wait_for_parent();

/// Counts completions of the current round; install with handler().
struct round_counter {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t done = 0;
  uint64_t failed = 0;
  std::string first_error;

  transport::completion_handler handler();
};

/// One transport round: `bytes` as KV-shaped batches of `chunk` pages with
/// random page orders on both sides, `window` batches in flight. GB/s.
double transport_round(transport::transport& net, transport::peer_id peer, const kv_layout& src,
                       const kv_layout& dst, uint64_t bytes, uint32_t chunk, uint32_t window,
                       std::mt19937& rng, round_counter& rc, uint64_t& writes, uint64_t fence = 0);

/// The same batches (same plan, same order) as memcpy from `src_pool` into
/// `dst_pool` by this thread. GB/s.
double memcpy_round(const apps::host_pool& src_pool, const apps::host_pool& dst_pool,
                    const kv_layout& src, const kv_layout& dst, uint64_t bytes, uint32_t chunk,
                    std::mt19937& rng);

/// Reads the baseline stream: per round, an 8-byte length, that many bytes
/// into the pool's memory (cycling through its buffers), then a 1-byte ack.
void raw_sink(int fd, const apps::host_pool& pool);

/// One baseline round: `bytes` from the pool's memory down a raw socket, in
/// writes of `chunk` bytes. GB/s.
double raw_round(int fd, const apps::host_pool& pool, uint64_t bytes, uint64_t chunk = 1 << 20);

}  // namespace kvferry::bench
