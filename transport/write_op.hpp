// The one-sided write, the unit of the data plane: bytes of a local region
// go to a remote region. A batch is posted at once and completes at once.
#pragma once

#include <cstdint>
#include <vector>

#include "transport/region.hpp"
#include "transport/status.hpp"

namespace kvferry::transport {

/// A peer this transport connected to; valid until the transport is destroyed.
using peer_id = uint32_t;

/// (local region, offset) → (remote region, offset), `length` bytes.
struct write_op {
  region_id local = 0;
  uint64_t local_offset = 0;
  region_id remote = 0;
  uint64_t remote_offset = 0;
  uint64_t length = 0;

  friend bool operator==(const write_op&, const write_op&) = default;
};

/// Writes posted together. `cookie` is the caller's, returned in the
/// completion; `fence` (0: none) must be open at the receiver for the batch
/// to be written (see transport::open_fence).
struct write_batch {
  uint64_t cookie = 0;
  std::vector<write_op> ops;
  uint64_t fence = 0;

  /// Sum of the lengths of all ops.
  uint64_t bytes() const {
    uint64_t n = 0;
    for (auto& op : ops)
      n += op.length;
    return n;
  }
};

/// The outcome of one posted batch: every byte placed at the peer, or an error
/// (then none, some or all of the bytes may have landed; the batch's room fails).
struct completion {
  uint64_t cookie = 0;
  status result;
};

}  // namespace kvferry::transport
