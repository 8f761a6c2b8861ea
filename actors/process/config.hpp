// The actor system configuration of a kvferry node: the shared vocabulary, the
// middleman, heartbeats on, and the "kvferry" option group.
#pragma once

#include <string>

#include <caf/actor_system_config.hpp>

#include "actors/common/deadlines.hpp"

namespace kvferry {

/// Prepares any actor system config for kvferry: registers the message types
/// and the error category, loads the middleman, and turns CAF's heartbeats on
/// (1 s interval, 10 s timeout) so a frozen peer is eventually dropped. Call it
/// in the constructor of an embedding scheduler's own config; every node of a
/// deployment must use the same heartbeat values.
void prepare(caf::actor_system_config& cfg);

/// A ready-made config for kvferry's own binaries and for embedding.
class config : public caf::actor_system_config {
 public:
  config();

  /// Per-state room deadlines and the heartbeat (--kvferry.bootstrap-timeout=60s,
  /// --kvferry.heartbeat-interval=200ms ...).
  deadlines limits;
  /// spdlog level for kvferry's logger: trace, debug, info, warn, error, off.
  std::string log_level = "warn";
};

}  // namespace kvferry
