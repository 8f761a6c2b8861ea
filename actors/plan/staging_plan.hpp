// The staging path's geometry, as pure functions: which chunks take it, how
// many bytes one writer stages, and the copies that gather a writer's head
// slice of every layer into one contiguous block (prefill) and scatter it
// back into the destination's pages (decode). No I/O, no CAF.
//
// A staged chunk of `pages` pages from writer w is laid out as
//   [pair 0][pair 1]...   the buffer pairs of planner's geometry_of() (the
//                         writer's layers in order, K then V of each),
//   each [page][token][n_heads][head_dim]
// with n_heads the heads the writer shares with the destination
// (tp_mapping's slice_of). Both sides derive it from the two layouts, so the
// decode side checks what the prefill side says it wrote.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "actors/plan/tp_mapping.hpp"
#include "messages/layout.hpp"
#include "transport/segment_copy.hpp"
#include "transport/status.hpp"

namespace kvferry {

/// True when chunks from `src` into `dst` would take the head-sliced path
/// (one write per token, layer and K/V): MHA/GQA with a slice narrower than
/// either side's row. Never for MLA (its latent is whole on every rank).
bool staging_applies(const kv_layout& src, const kv_layout& dst);

/// The heads `src` writes into `dst` (both ranks' places come from their layouts).
head_slice slice_between(const kv_layout& src, const kv_layout& dst);

/// One copy between a KV buffer and a staged block: `length` bytes at
/// `pool_offset` from page 0 of KV buffer `buffer` (of the side that copies),
/// and at `staged_offset` inside the block.
struct staged_copy {
  uint32_t buffer = 0;
  uint64_t pool_offset = 0;
  uint64_t staged_offset = 0;
  uint64_t length = 0;

  friend bool operator==(const staged_copy&, const staged_copy&) = default;
};

/// Bytes writer `src` stages for `pages` pages into `dst`.
uint64_t staged_bytes(const kv_layout& src, const kv_layout& dst, uint64_t pages);

/// Prefill: the copies that gather `src_pages` of `src` (the heads it shares
/// with `dst`, every layer `dst` holds) into a block of staged_bytes(). Runs
/// where both sides are contiguous merge. Refuses a page outside the pool or
/// two ranks that share no head, naming the value.
transport::result<std::vector<staged_copy>> plan_gather(const kv_layout& src, const kv_layout& dst,
                                                        std::span<const uint32_t> src_pages);

/// Decode: the copies that scatter a block gathered by `src` into `dst_pages`
/// of `dst` (buffers of `dst`), leaving the first `skip_tokens` tokens of
/// the first page as they are (prefix reuse: the block still carries them).
/// Same checks, and a skip below the page size.
transport::result<std::vector<staged_copy>> plan_scatter(const kv_layout& src, const kv_layout& dst,
                                                         std::span<const uint32_t> dst_pages,
                                                         uint32_t skip_tokens = 0);

/// Bytes of `copies` that land in the block (their sum).
uint64_t copied_bytes(const std::vector<staged_copy>& copies);

/// `copies` as segment lists, one per KV buffer (`buffers` of them), for
/// transport/segment_copy (the CPU copy and the CUDA kernel): the block's
/// side is offset by `block_offset` (where the block lies in the ring or the
/// gather buffer). `into_block`: the pool is the source (gather); otherwise
/// the block is (scatter).
std::vector<std::vector<transport::copy_segment>> segments_by_buffer(
    const std::vector<staged_copy>& copies, size_t buffers, uint64_t block_offset, bool into_block);

}  // namespace kvferry
