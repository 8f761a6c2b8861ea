// The verbs backend's own settings (transport/options.hpp carries them:
// `opts.backend<verbs::verbs_options>()`). Where its side channel listens is
// the shared options::listen_host and listen_port.
#pragma once

#include <cstdint>
#include <string>

namespace kvferry::transport::verbs {

/// Whether the receiver grants each batch through memory windows.
///
/// With windows, a region is registered without remote access; for each
/// admitted batch the receiver binds type-2 memory windows over exactly the
/// bytes the batch's ops name, bound to that sender's queue pair, tells the
/// sender their rkeys, and invalidates them when the batch ends, before it
/// releases the batch. A sender can write only the pages it was granted, and
/// only while the batch lasts. Without, the sender is told each region's
/// rkey and can write anywhere in that region for as long as its queue pair
/// lives.
enum class windows_mode {
  /// Windows, or the transport does not start (the device has no type-2B
  /// memory windows, or ibv_alloc_mw fails).
  required,
  /// Windows where the device has them; elsewhere the whole region's rkey,
  /// with a warning on stderr once per process. (A per-batch ibv_reg_mr over
  /// the granted bytes would keep the promise without windows, but pins and
  /// maps the pages again for every batch: too slow for the data path.)
  preferred,
  /// The whole region's rkey (wire version 1's behaviour).
  off,
};

struct verbs_options {
  std::string device;  ///< RDMA device name, empty for the first one found
  uint8_t port = 1;    ///< port of that device
  int gid_index = 0;   ///< GID index (RoCE needs a valid one), -1: LID only
  windows_mode windows = windows_mode::preferred;
  /// Windows one batch may need (separate ranges of receiver memory after
  /// touching ops are joined); a batch that needs more is refused, naming
  /// both numbers. Each is one bind and one invalidation on the receiver.
  uint32_t max_windows_per_batch = 8192;
  /// Windows one connection may hold bound at once (over all its admitted
  /// batches): bounds the device resources one sender can take; a batch
  /// that would go past it is refused until earlier batches end.
  uint32_t max_windows_per_connection = 65536;
};

}  // namespace kvferry::transport::verbs
