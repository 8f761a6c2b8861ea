// The transfer planner: pure functions that turn a chunk (source pages,
// destination pages, both layouts) into transport writes. No I/O, no CAF.
//
// Equal layouts: one write per run of consecutive pages per KV buffer. A run
// is a stretch where both the source and the destination page ids go up by
// one; every layer's buffers go into the same plan, so a chunk is one batch.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "messages/layout.hpp"
#include "transport/status.hpp"
#include "transport/write_op.hpp"

namespace kvferry {

/// Writes for one batch and what they add up to.
struct write_plan {
  std::vector<transport::write_op> ops;
  uint64_t bytes = 0;
};

/// Plans the KV writes of one chunk between ranks whose layouts pair 1:1
/// (compare() found no difference). Refuses, naming the value, a page out of
/// range on either side or page lists of different lengths; never truncates.
/// Writes longer than `max_write_bytes` are split.
transport::result<write_plan> plan_kv(const kv_layout& src, const kv_layout& dst,
                                      std::span<const uint32_t> src_pages,
                                      std::span<const uint32_t> dst_pages,
                                      uint64_t max_write_bytes = UINT64_MAX);

/// Appends the writes of aux row `src_slot` → `dst_slot`, one per aux buffer.
transport::status plan_aux(write_plan& plan, const kv_layout& src, const kv_layout& dst,
                           uint32_t src_slot, uint32_t dst_slot);

}  // namespace kvferry
