// What a rank's staging side is given: whether it stages at all, the sizes
// of its ring (decode) or gather buffer (prefill), and how long a staged
// chunk may wait for its slot. Read by the runtime, the demo and the
// launcher's cluster file.
#pragma once

#include <chrono>
#include <cstdint>

namespace kvferry {

/// The staging path for heterogeneous TP (MHA/GQA with different TP sizes):
/// a decode rank's ring, a prefill rank's gather buffer. Both are shared
/// memory of the rank, registered with its transport; a rank of a role
/// allocates only its own. A chunk larger than either fails its room, naming
/// both sizes.
struct staging_options {
  bool enabled = true;               ///< off: every chunk takes the sliced path
  uint64_t ring_bytes = 32 << 20;    ///< decode: the staging ring
  uint64_t gather_bytes = 32 << 20;  ///< prefill: the gather buffer
  /// Prefill: how long a staged chunk may wait for its ring slot.
  std::chrono::milliseconds slot_wait{10000};
};

}  // namespace kvferry
