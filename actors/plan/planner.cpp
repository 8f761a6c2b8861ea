#include "actors/plan/planner.hpp"

#include <algorithm>
#include <string>

#include "actors/plan/tp_mapping.hpp"

namespace kvferry {

namespace {

using transport::status;

/// Appends a write, merging it into the previous one where both sides
/// continue it, and splitting what exceeds `max_write`.
void append(write_plan& plan, transport::write_op op, uint64_t max_write) {
  plan.bytes += op.length;
  if (!plan.ops.empty()) {
    auto& last = plan.ops.back();
    if (last.local == op.local && last.remote == op.remote &&
        last.local_offset + last.length == op.local_offset &&
        last.remote_offset + last.length == op.remote_offset &&
        last.length + op.length <= max_write) {
      last.length += op.length;
      return;
    }
  }
  while (op.length > max_write) {
    auto head = op;
    head.length = max_write;
    plan.ops.push_back(head);
    op.local_offset += max_write;
    op.remote_offset += max_write;
    op.length -= max_write;
  }
  plan.ops.push_back(op);
}

std::string heads_text(const head_range& h) {
  return "[" + std::to_string(h.first) + "," + std::to_string(h.first + h.count) + ")";
}

}  // namespace

transport::status check_page_list(std::span<const uint32_t> pages, uint64_t capacity,
                                  const char* side) {
  for (size_t i = 0; i < pages.size(); ++i)
    if (pages[i] >= capacity)
      return status::invalid_argument(std::string{side} + " page " + std::to_string(pages[i]) +
                                      " at position " + std::to_string(i) +
                                      " out of range, the pool holds " + std::to_string(capacity) +
                                      " pages");
  return {};
}

transport::result<slice_geometry> geometry_of(const kv_layout& src, const kv_layout& dst) {
  if (src.page_size != dst.page_size || src.head_dim != dst.head_dim || src.dtype != dst.dtype)
    return status::invalid_argument(
        "page geometry differs: page_size " + std::to_string(src.page_size) + "/" +
        std::to_string(dst.page_size) + ", head_dim " + std::to_string(src.head_dim) + "/" +
        std::to_string(dst.head_dim));
  slice_geometry g;
  g.slice =
      slice_of(src.total_kv_heads, src.tp_size, src.tp_rank, dst.tp_size, dst.tp_rank, src.mla);
  auto& slice = g.slice;
  if (slice.n_heads == 0)
    return status::invalid_argument(
        "prefill tp" + std::to_string(src.tp_rank) + " holds heads " +
        heads_text(heads_of(src.total_kv_heads, src.tp_size, src.tp_rank, src.mla)) +
        " and decode tp" + std::to_string(dst.tp_rank) + " holds heads " +
        heads_text(heads_of(dst.total_kv_heads, dst.tp_size, dst.tp_rank, dst.mla)) +
        ": they share none");
  uint64_t head_bytes = uint64_t{src.head_dim} * dtype_size(src.dtype);
  g.src_tok = src.token_bytes();
  g.dst_tok = dst.token_bytes();
  g.slice_bytes = slice.n_heads * head_bytes;
  g.src_in_tok = slice.src_head_start * head_bytes;
  g.dst_in_tok = slice.dst_head_start * head_bytes;
  if (g.src_in_tok + g.slice_bytes > g.src_tok || g.dst_in_tok + g.slice_bytes > g.dst_tok)
    return status::invalid_argument("a slice of " + std::to_string(slice.n_heads) +
                                    " heads at head " + std::to_string(slice.src_head_start) + "/" +
                                    std::to_string(slice.dst_head_start) +
                                    " exceeds the token rows of " + std::to_string(src.kv_heads) +
                                    "/" + std::to_string(dst.kv_heads) + " heads");
  g.whole = g.slice_bytes == g.src_tok && g.slice_bytes == g.dst_tok;

  // Pair buffers by layer id: K with K, V with V.
  for (size_t i = 0; i < src.layer_ids.size(); ++i)
    for (bool value : {false, true}) {
      if (value && src.mla)
        continue;
      auto s = src.buffer_of(src.layer_ids[i], value);
      auto d = dst.buffer_of(src.layer_ids[i], value);
      if (s < 0 || d < 0 || static_cast<size_t>(s) >= src.kv_buffers.size() ||
          static_cast<size_t>(d) >= dst.kv_buffers.size())
        return status::invalid_argument("layer " + std::to_string(src.layer_ids[i]) +
                                        " of the source is not held by the destination " +
                                        format_ids(dst.layer_ids));
      g.pairs.emplace_back(static_cast<size_t>(s), static_cast<size_t>(d));
    }
  return g;
}

transport::result<write_plan> plan_kv(const kv_layout& src, const kv_layout& dst,
                                      std::span<const uint32_t> src_pages,
                                      std::span<const uint32_t> dst_pages, uint64_t max_write_bytes,
                                      uint32_t skip_tokens) {
  if (src_pages.size() != dst_pages.size())
    return status::invalid_argument(std::to_string(src_pages.size()) + " source pages against " +
                                    std::to_string(dst_pages.size()) +
                                    " destination pages, expected one destination per source page");
  if (auto st = check_page_list(src_pages, src.page_capacity(), "source"); !st.ok())
    return st;
  if (auto st = check_page_list(dst_pages, dst.page_capacity(), "destination"); !st.ok())
    return st;
  if (max_write_bytes == 0)
    max_write_bytes = UINT64_MAX;
  if (skip_tokens >= src.page_size)
    return status::invalid_argument(
        "a skip of " + std::to_string(skip_tokens) +
        " tokens of the first page, expected fewer than the page size " +
        std::to_string(src.page_size));

  auto g = geometry_of(src, dst);
  if (!g.ok())
    return g.error();
  auto& [slice, src_tok, dst_tok, slice_bytes, src_in_tok, dst_in_tok, whole, pairs] = *g;

  write_plan plan;
  plan.ops.reserve(pairs.size() * src_pages.size() * (whole ? 1 : src.page_size));
  for (auto [sb, db] : pairs) {
    auto& s = src.kv_buffers[sb];
    auto& d = dst.kv_buffers[db];
    for (size_t i = 0; i < src_pages.size(); ++i) {
      auto src_page = s.offset + src_pages[i] * s.item_len;
      auto dst_page = d.offset + dst_pages[i] * d.item_len;
      uint32_t first = i == 0 ? skip_tokens : 0;
      if (whole) {
        append(plan,
               {s.region, src_page + first * src_tok, d.region, dst_page + first * dst_tok,
                s.item_len - first * src_tok},
               max_write_bytes);
        continue;
      }
      for (uint32_t t = first; t < src.page_size; ++t)
        append(plan,
               {s.region, src_page + t * src_tok + src_in_tok, d.region,
                dst_page + t * dst_tok + dst_in_tok, slice_bytes},
               max_write_bytes);
    }
  }
  return plan;
}

transport::status plan_aux(write_plan& plan, const kv_layout& src, const kv_layout& dst,
                           uint32_t src_slot, uint32_t dst_slot) {
  if (src.aux_buffers.size() != dst.aux_buffers.size())
    return status::invalid_argument(std::to_string(src.aux_buffers.size()) +
                                    " source aux buffers against " +
                                    std::to_string(dst.aux_buffers.size()) + " destination");
  if (src.aux_buffers.empty())
    return {};
  if (src_slot >= src.aux_capacity())
    return status::invalid_argument("source aux row " + std::to_string(src_slot) +
                                    " out of range, the aux buffers hold " +
                                    std::to_string(src.aux_capacity()) + " rows");
  if (dst_slot >= dst.aux_capacity())
    return status::invalid_argument("destination aux row " + std::to_string(dst_slot) +
                                    " out of range, the aux buffers hold " +
                                    std::to_string(dst.aux_capacity()) + " rows");
  for (size_t a = 0; a < src.aux_buffers.size(); ++a) {
    auto& s = src.aux_buffers[a];
    auto& d = dst.aux_buffers[a];
    if (s.item_len != d.item_len)
      return status::invalid_argument("aux buffer " + std::to_string(a) + " item_len source " +
                                      std::to_string(s.item_len) + " destination " +
                                      std::to_string(d.item_len) + ", expected equal");
    append(plan,
           {s.region, s.offset + src_slot * s.item_len, d.region, d.offset + dst_slot * d.item_len,
            s.item_len},
           UINT64_MAX);
  }
  return {};
}

transport::status plan_states(write_plan& plan, const kv_layout& src, const kv_layout& dst,
                              const std::vector<std::vector<uint32_t>>& src_indices,
                              const std::vector<std::vector<uint32_t>>& dst_indices) {
  auto n = src.states.size();
  if (dst.states.size() != n || src_indices.size() != n || dst_indices.size() != n)
    return status::invalid_argument("state indices for " + std::to_string(src_indices.size()) +
                                    " (source) and " + std::to_string(dst_indices.size()) +
                                    " (destination) components, expected " + std::to_string(n));
  for (size_t c = 0; c < n; ++c) {
    auto& ss = src.states[c];
    auto& ds = dst.states[c];
    auto name = "state component " + std::to_string(c) + " (" + to_string(ss.kind) + ")";
    auto& si = src_indices[c];
    auto& di = dst_indices[c];
    if (ss.kind == state_kind::single_slot && (si.size() != 1 || di.size() != 1))
      return status::invalid_argument(name + ": " + std::to_string(si.size()) + " source and " +
                                      std::to_string(di.size()) +
                                      " destination indices, expected one on each side");
    if (si.size() != di.size())
      return status::invalid_argument(name + ": " + std::to_string(si.size()) +
                                      " source indices against " + std::to_string(di.size()) +
                                      " destination indices, expected as many on each side");
    if (ss.buffers.size() != ds.buffers.size())
      return status::invalid_argument(name + ": " + std::to_string(ss.buffers.size()) +
                                      " source buffers against " +
                                      std::to_string(ds.buffers.size()));
    auto scap = src.state_capacity(c);
    auto dcap = dst.state_capacity(c);
    for (size_t i = 0; i < si.size(); ++i) {
      if (si[i] >= scap || di[i] >= dcap)
        return status::invalid_argument(
            name + ": index " + std::to_string(si[i] >= scap ? si[i] : di[i]) + " on the " +
            (si[i] >= scap ? "source" : "destination") + " side out of range, it holds " +
            std::to_string(si[i] >= scap ? scap : dcap) + " items");
    }
    for (size_t b = 0; b < ss.buffers.size(); ++b) {
      auto& s = ss.buffers[b];
      auto& d = ds.buffers[b];
      if (s.item_len != d.item_len)
        return status::invalid_argument(name + " buffer " + std::to_string(b) +
                                        " item_len source " + std::to_string(s.item_len) +
                                        " destination " + std::to_string(d.item_len));
      for (size_t i = 0; i < si.size(); ++i)
        append(plan,
               {s.region, s.offset + si[i] * s.item_len, d.region, d.offset + di[i] * d.item_len,
                s.item_len},
               UINT64_MAX);
    }
  }
  return {};
}

}  // namespace kvferry
