#include "actors/transfer/planner.hpp"

#include <algorithm>
#include <string>

namespace kvferry {

namespace {

using transport::status;

status check_pages(std::span<const uint32_t> pages, uint64_t capacity, const char* side) {
  for (size_t i = 0; i < pages.size(); ++i)
    if (pages[i] >= capacity)
      return status::invalid_argument(std::string{side} + " page " + std::to_string(pages[i]) +
                                      " at position " + std::to_string(i) +
                                      " out of range, the pool holds " + std::to_string(capacity) +
                                      " pages");
  return {};
}

void add_write(write_plan& plan, const buffer_desc& s, const buffer_desc& d, uint64_t src_item,
               uint64_t dst_item, uint64_t bytes, uint64_t max_write) {
  auto src_off = s.offset + src_item * s.item_len;
  auto dst_off = d.offset + dst_item * d.item_len;
  while (bytes > 0) {
    auto len = std::min(bytes, max_write);
    plan.ops.push_back({s.region, src_off, d.region, dst_off, len});
    plan.bytes += len;
    src_off += len;
    dst_off += len;
    bytes -= len;
  }
}

}  // namespace

transport::result<write_plan> plan_kv(const kv_layout& src, const kv_layout& dst,
                                      std::span<const uint32_t> src_pages,
                                      std::span<const uint32_t> dst_pages,
                                      uint64_t max_write_bytes) {
  if (src_pages.size() != dst_pages.size())
    return status::invalid_argument(std::to_string(src_pages.size()) + " source pages against " +
                                    std::to_string(dst_pages.size()) +
                                    " destination pages, expected one destination per source page");
  if (src.kv_buffers.size() != dst.kv_buffers.size())
    return status::invalid_argument(std::to_string(src.kv_buffers.size()) +
                                    " source kv buffers against " +
                                    std::to_string(dst.kv_buffers.size()) + " destination buffers");
  if (auto st = check_pages(src_pages, src.page_capacity(), "source"); !st.ok())
    return st;
  if (auto st = check_pages(dst_pages, dst.page_capacity(), "destination"); !st.ok())
    return st;
  if (max_write_bytes == 0)
    max_write_bytes = UINT64_MAX;

  // Runs of pages where both sides are consecutive.
  struct run {
    uint32_t src, dst, len;
  };
  std::vector<run> runs;
  for (size_t i = 0; i < src_pages.size();) {
    size_t j = i + 1;
    while (j < src_pages.size() && src_pages[j] == src_pages[j - 1] + 1 &&
           dst_pages[j] == dst_pages[j - 1] + 1)
      ++j;
    runs.push_back({src_pages[i], dst_pages[i], static_cast<uint32_t>(j - i)});
    i = j;
  }

  write_plan plan;
  plan.ops.reserve(runs.size() * src.kv_buffers.size());
  for (size_t b = 0; b < src.kv_buffers.size(); ++b) {
    auto& s = src.kv_buffers[b];
    auto& d = dst.kv_buffers[b];
    if (s.item_len != d.item_len)
      return status::invalid_argument("kv buffer " + std::to_string(b) + " item_len source " +
                                      std::to_string(s.item_len) + " destination " +
                                      std::to_string(d.item_len) + ", expected equal");
    for (auto& r : runs)
      add_write(plan, s, d, r.src, r.dst, uint64_t{r.len} * s.item_len, max_write_bytes);
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
    add_write(plan, s, d, src_slot, dst_slot, s.item_len, UINT64_MAX);
  }
  return {};
}

}  // namespace kvferry
