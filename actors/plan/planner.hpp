// The transfer planner: pure functions that turn a chunk (source pages,
// destination pages, both ranks' layouts) into transport writes. No I/O, no
// CAF.
//
// Buffers pair by layer id (K with K, V with V, MLA latent with latent), so a
// prefill PP stage writes its own layers into a decode rank that holds all of
// them. A source writes the heads it shares with its destination
// (tp_mapping.hpp): with the same heads on both sides a page is one write and
// consecutive pages merge into one write per buffer; with different TP every
// token of every page carries a slice of its row (per-token writes, which
// staging exists to avoid). Every layer of a chunk goes into one plan, so a
// chunk is one batch.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "actors/plan/tp_mapping.hpp"
#include "messages/layout.hpp"
#include "transport/status.hpp"
#include "transport/write_op.hpp"

namespace kvferry {

/// Writes for one batch and what they add up to.
struct write_plan {
  std::vector<transport::write_op> ops;
  uint64_t bytes = 0;
};

/// Checks every page of `pages` against a pool of `capacity` pages; the
/// error names the `side` ("source"), the page, its position and the capacity.
transport::status check_page_list(std::span<const uint32_t> pages, uint64_t capacity,
                                  const char* side);

/// What a source rank writes of each token row into a destination rank, and
/// which of their KV buffers pair (by layer id: K with K, V with V, in the
/// source's layer order, K before V). The sliced and the staged path share it.
struct slice_geometry {
  head_slice slice;
  uint64_t src_tok = 0;                          ///< bytes of a token row on the source
  uint64_t dst_tok = 0;                          ///< ... on the destination
  uint64_t slice_bytes = 0;                      ///< bytes of the shared heads in one row
  uint64_t src_in_tok = 0;                       ///< where they start in a source row
  uint64_t dst_in_tok = 0;                       ///< ... in a destination row
  bool whole = false;                            ///< the slice is the whole row on both sides
  std::vector<std::pair<size_t, size_t>> pairs;  ///< (source buffer, destination buffer)
};

/// The slice geometry of two ranks; refuses, naming the values, ranks that
/// share no head or a source layer the destination does not hold.
transport::result<slice_geometry> geometry_of(const kv_layout& src, const kv_layout& dst);

/// Plans the KV writes of one chunk from a prefill rank (`src`) to a decode
/// rank (`dst`). Refuses, naming the value, page lists of different lengths, a
/// page out of either pool, a layer the destination does not hold, or two
/// ranks that share no head; never truncates. Writes are merged where both
/// sides are contiguous and split at `max_write_bytes`. The first
/// `skip_tokens` tokens of the first page are not written (prefix reuse: the
/// destination holds them); a skip of a page or more is refused.
transport::result<write_plan> plan_kv(const kv_layout& src, const kv_layout& dst,
                                      std::span<const uint32_t> src_pages,
                                      std::span<const uint32_t> dst_pages,
                                      uint64_t max_write_bytes = UINT64_MAX,
                                      uint32_t skip_tokens = 0);

/// Appends the writes of aux row `src_slot` → `dst_slot`, one per aux buffer.
transport::status plan_aux(write_plan& plan, const kv_layout& src, const kv_layout& dst,
                           uint32_t src_slot, uint32_t dst_slot);

/// Appends the writes of the state components: for component c, item
/// src[c][i] → dst[c][i] of every buffer. A single-slot component takes one
/// index on each side; a page-indexed one the same number on each side.
transport::status plan_states(write_plan& plan, const kv_layout& src, const kv_layout& dst,
                              const std::vector<std::vector<uint32_t>>& src_indices,
                              const std::vector<std::vector<uint32_t>>& dst_indices);

}  // namespace kvferry
