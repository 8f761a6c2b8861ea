// A synthetic scheduler: drives rooms through the same sender/receiver API an
// embedding scheduler uses. The prefill driver picks random free pages, writes
// the room's pattern into them (what a forward pass would compute) and sends
// them in chunks; the decode driver reserves random free pages, waits, and on
// Success checks every byte. Both sides derive the rooms from one workload.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "actors/facade/runtime.hpp"
#include "apps/common/host_pool.hpp"

namespace kvferry::apps {

struct workload {
  uint64_t seed = 42;
  uint32_t rooms = 200;
  uint64_t first_room = 1;
  uint32_t min_tokens = 16;
  uint32_t max_tokens = 192;
  uint32_t chunk_pages = 4;  ///< pages per chunk (chunked prefill); 0 = one chunk
  uint32_t concurrency = 8;  ///< rooms in flight per side

  uint64_t room_id(uint32_t i) const { return first_room + i; }
  /// Tokens of room `room` (deterministic).
  uint32_t tokens_of(uint64_t room) const;
  /// Pages of room `room` with `page_size` tokens per page.
  uint32_t pages_of(uint64_t room, uint32_t page_size) const;
};

struct run_report {
  uint32_t rooms = 0;
  uint32_t success = 0;
  uint32_t failed = 0;
  uint32_t verified = 0;   ///< decode: rooms whose bytes were checked and matched
  uint32_t corrupted = 0;  ///< decode: rooms with a byte that did not match
  uint64_t bytes = 0;      ///< KV + aux bytes of successful rooms
  double seconds = 0;
  std::map<std::string, uint32_t> states_seen;  ///< rooms that were seen in each state
  std::map<std::string, uint32_t> failures;     ///< failure code → rooms
  std::vector<std::string> first_errors;        ///< up to 5 full errors
  std::vector<double> latencies_us;             ///< per room, open to terminal

  double gbps() const { return seconds > 0 ? bytes / seconds / 1e9 : 0; }
  bool ok() const { return failed == 0 && corrupted == 0 && success == rooms; }
  /// Several lines for people.
  std::string to_text(const std::string& side) const;
};

/// Runs the prefill side of the workload; returns when every room concluded.
run_report drive_prefill(runtime& rt, const host_pool& pool, const workload& w);

/// Runs the decode side; `where` is the prefill instance's bootstrap.
run_report drive_decode(runtime& rt, const host_pool& pool, const workload& w,
                        const bootstrap_locator& where);

}  // namespace kvferry::apps
