#include "actors/plan/staging_plan.hpp"

#include <string>

#include "actors/plan/planner.hpp"

namespace kvferry {

namespace {

/// Appends a copy, merging it into the previous one where both the pool side
/// and the block continue it.
void append(std::vector<staged_copy>& out, staged_copy c) {
  if (!out.empty()) {
    auto& last = out.back();
    if (last.buffer == c.buffer && last.pool_offset + last.length == c.pool_offset &&
        last.staged_offset + last.length == c.staged_offset) {
      last.length += c.length;
      return;
    }
  }
  out.push_back(c);
}

/// The copies between a block and one side's pool: `pages` of that side,
/// `tok` and `in_tok` its row bytes and the slice's start in a row, `buffer`
/// picks that side's buffer of each pair; the first `skip` tokens of the
/// first page keep their place in the block but are not copied.
std::vector<staged_copy> plan_block(const slice_geometry& g, const kv_layout& side,
                                    std::span<const uint32_t> pages, bool source_side,
                                    uint32_t skip = 0) {
  std::vector<staged_copy> out;
  auto tok = source_side ? g.src_tok : g.dst_tok;
  auto in_tok = source_side ? g.src_in_tok : g.dst_in_tok;
  uint64_t staged = 0;
  for (auto [sb, db] : g.pairs) {
    auto b = static_cast<uint32_t>(source_side ? sb : db);
    auto item = side.kv_buffers[b].item_len;
    for (size_t i = 0; i < pages.size(); ++i)
      for (uint32_t t = 0; t < side.page_size; ++t) {
        if (i > 0 || t >= skip)
          append(out, {b, uint64_t{pages[i]} * item + t * tok + in_tok, staged, g.slice_bytes});
        staged += g.slice_bytes;
      }
  }
  return out;
}

}  // namespace

head_slice slice_between(const kv_layout& src, const kv_layout& dst) {
  return slice_of(src.total_kv_heads, src.tp_size, src.tp_rank, dst.tp_size, dst.tp_rank, src.mla);
}

bool staging_applies(const kv_layout& src, const kv_layout& dst) {
  if (src.mla || dst.mla)
    return false;
  auto g = geometry_of(src, dst);
  return g.ok() && !g->whole;
}

uint64_t staged_bytes(const kv_layout& src, const kv_layout& dst, uint64_t pages) {
  auto g = geometry_of(src, dst);
  if (!g.ok())
    return 0;
  return g->pairs.size() * pages * src.page_size * g->slice_bytes;
}

transport::result<std::vector<staged_copy>> plan_gather(const kv_layout& src, const kv_layout& dst,
                                                        std::span<const uint32_t> src_pages) {
  if (auto st = check_page_list(src_pages, src.page_capacity(), "source"); !st.ok())
    return st;
  auto g = geometry_of(src, dst);
  if (!g.ok())
    return g.error();
  return plan_block(*g, src, src_pages, true);
}

transport::result<std::vector<staged_copy>> plan_scatter(const kv_layout& src, const kv_layout& dst,
                                                         std::span<const uint32_t> dst_pages,
                                                         uint32_t skip_tokens) {
  if (auto st = check_page_list(dst_pages, dst.page_capacity(), "destination"); !st.ok())
    return st;
  if (skip_tokens >= dst.page_size)
    return transport::status::invalid_argument("skip of " + std::to_string(skip_tokens) +
                                               " tokens, expected fewer than the page size " +
                                               std::to_string(dst.page_size));
  auto g = geometry_of(src, dst);
  if (!g.ok())
    return g.error();
  return plan_block(*g, dst, dst_pages, false, skip_tokens);
}

std::vector<std::vector<transport::copy_segment>> segments_by_buffer(
    const std::vector<staged_copy>& copies, size_t buffers, uint64_t block_offset,
    bool into_block) {
  std::vector<std::vector<transport::copy_segment>> out(buffers);
  for (auto& c : copies) {
    if (c.buffer >= buffers)
      continue;  // plans only name the side's own buffers
    auto block = block_offset + c.staged_offset;
    out[c.buffer].push_back(into_block ? transport::copy_segment{c.pool_offset, block, c.length}
                                       : transport::copy_segment{block, c.pool_offset, c.length});
  }
  return out;
}

uint64_t copied_bytes(const std::vector<staged_copy>& copies) {
  uint64_t n = 0;
  for (auto& c : copies)
    n += c.length;
  return n;
}

}  // namespace kvferry
