#include "transport/verbs/window_plan.hpp"

#include <algorithm>
#include <string>

namespace kvferry::transport::verbs {

namespace {

/// The bytes one op names, remembered with its index to map it back.
struct op_range {
  region_id region;
  uint64_t offset;
  uint64_t end;
  size_t op;
};

}  // namespace

result<window_plan> plan_windows(const std::vector<op_header>& ops,
                                 const std::map<region_id, region_extent>& extents,
                                 uint32_t max_windows) {
  window_plan plan;
  plan.targets.resize(ops.size());
  std::vector<op_range> ranges;
  ranges.reserve(ops.size());
  for (size_t k = 0; k < ops.size(); ++k) {
    auto& op = ops[k];
    auto found = extents.find(op.region);
    if (found == extents.end())
      return status::unknown_region("receiver region " + std::to_string(op.region) +
                                    " is not registered");
    auto& ext = found->second;
    if (ext.length > UINT64_MAX - ext.base)
      return status::invalid_argument("receiver region " + std::to_string(op.region) + " of " +
                                      std::to_string(ext.length) + " B at address " +
                                      std::to_string(ext.base) + " wraps around the address space");
    // Written so that no sum can overflow: offset <= len and length <= len - offset.
    if (op.offset > ext.length || op.length > ext.length - op.offset)
      return status::out_of_bounds("write of " + std::to_string(op.length) + " B at offset " +
                                   std::to_string(op.offset) + " past receiver region " +
                                   std::to_string(op.region) + " (" + std::to_string(ext.length) +
                                   " B)");
    plan.targets[k].addr = ext.base + op.offset;
    if (op.length != 0)
      ranges.push_back(op_range{op.region, op.offset, op.offset + op.length, k});
  }
  std::sort(ranges.begin(), ranges.end(), [](const op_range& a, const op_range& b) {
    return a.region != b.region ? a.region < b.region : a.offset < b.offset;
  });
  // Merge only what overlaps or touches: a window never spans a gap.
  for (auto& r : ranges) {
    auto& windows = plan.windows;
    bool joins = !windows.empty() && windows.back().region == r.region &&
                 r.offset <= windows.back().offset + windows.back().length;
    if (joins) {
      auto& w = windows.back();
      w.length = std::max(w.offset + w.length, r.end) - w.offset;
    } else {
      windows.push_back(planned_window{r.region, r.offset, r.end - r.offset,
                                       extents.at(r.region).base + r.offset});
    }
    plan.targets[r.op].window = static_cast<uint32_t>(windows.size() - 1);
  }
  if (plan.windows.size() > max_windows)
    return status::invalid_argument(
        "batch of " + std::to_string(ops.size()) + " ops needs " +
        std::to_string(plan.windows.size()) +
        " memory windows (separate ranges of receiver memory), at most " +
        std::to_string(max_windows) + " per batch: split the batch");
  return plan;
}

std::optional<uint32_t> next_window_rkey(uint32_t current, uint32_t first) {
  constexpr uint32_t key_mask = 0xFF;
  uint32_t next = (current & ~key_mask) | ((current + 1) & key_mask);
  if (next == first)
    return std::nullopt;
  return next;
}

}  // namespace kvferry::transport::verbs
