// Which memory windows the verbs receiver binds for one admitted batch, and
// which window and remote address each op of the batch writes through: plain
// logic, no device, so that it is tested exhaustively where no RDMA device
// exists (tests/transport/verbs_windows_test.cpp).
//
// The promise: the windows cover exactly the bytes the batch's ops name,
// not one byte more. Ops on one region that overlap or touch share a window;
// a gap between two ops is never bridged, since a window over it would let
// the sender write bytes nobody granted. A batch that would need more than
// the cap of windows is refused, naming both numbers; the sender splits it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "transport/base/op_header.hpp"
#include "transport/region.hpp"
#include "transport/status.hpp"

namespace kvferry::transport::verbs {

/// Where a receiver region lies in its address space (the address a remote
/// write names) and how long it is.
struct region_extent {
  uint64_t base = 0;
  uint64_t length = 0;
};

/// One window to bind: `length` bytes at `offset` of `region` (at address
/// base + offset).
struct planned_window {
  region_id region = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint64_t addr = 0;
};

/// The window op k writes through (an index into windows) and the remote
/// address it writes at. A zero-length op writes nothing and has none.
struct op_target {
  static constexpr uint32_t no_window = UINT32_MAX;
  uint32_t window = no_window;
  uint64_t addr = 0;
};

struct window_plan {
  std::vector<planned_window> windows;  ///< by region, then offset; never touching
  std::vector<op_target> targets;       ///< one per op, in op order
};

/// Plans the windows of a batch of `ops` on regions `extents`. Refuses, with
/// the error naming the values, an op on a region not in `extents`
/// (unknown_region), one past its region (out_of_bounds), and a batch that
/// needs more than `max_windows` windows (invalid_argument).
result<window_plan> plan_windows(const std::vector<op_header>& ops,
                                 const std::map<region_id, region_extent>& extents,
                                 uint32_t max_windows);

/// The rkey a memory window's next bind gives it: the same window index (the
/// upper 24 bits), the next 8-bit key (ibv_inc_rkey's rule), so that the
/// rkey of its last bind no longer matches once it is bound again. Nothing
/// once the key would come back to `first` (the window's rkey when it was
/// allocated): it has used every key, and a further bind would revive an rkey
/// a sender was once told; retire the window and allocate a new one.
std::optional<uint32_t> next_window_rkey(uint32_t current, uint32_t first);

}  // namespace kvferry::transport::verbs
