// Grants: what a fence admits. The receiving rank opens a fence (a room's
// token) with a grant (transport::open_fence): which senders may write with
// it, and which items (pages, aux rows, state slots) of which of its buffers.
// Every backend checks each batch against it (transport/base/fence_table.hpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "transport/region.hpp"

namespace kvferry::transport {

/// Items [0, length / item_len) of `item_len` bytes from `offset` of region
/// `region`, of which `items` (sorted, shared between the buffers of one
/// grant) may be written; null: every item of the buffer (a staging ring).
struct granted_buffer {
  region_id region = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint64_t item_len = 0;
  std::shared_ptr<const std::vector<uint32_t>> items;
};

/// What one fence admits.
struct grant {
  std::vector<std::string> senders;  ///< endpoints (as their hellos name them)
  std::vector<granted_buffer> buffers;
};

}  // namespace kvferry::transport
