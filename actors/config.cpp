#include "actors/config.hpp"

#include <chrono>

#include <caf/io/middleman.hpp>

#include "messages/type_registry.hpp"

namespace kvferry {

void prepare(caf::actor_system_config& cfg) {
  register_types(cfg);
  cfg.load<caf::io::middleman>();
  cfg.set("middleman.heartbeat-interval", caf::timespan{std::chrono::seconds{1}});
  cfg.set("middleman.connection-timeout", caf::timespan{std::chrono::seconds{10}});
}

config::config() {
  prepare(*this);
  opt_group{custom_options_, "kvferry"}
      .add(limits.bootstrapping, "bootstrap-timeout",
           "deadline of a room in Bootstrapping (prefill: its request; decode: the handshake)")
      .add(limits.waiting_for_input, "waiting-timeout",
           "deadline of a room in WaitingForInput, re-armed by progress")
      .add(limits.transferring, "transfer-timeout",
           "deadline of a room in Transferring, re-armed by every chunk")
      .add(limits.verdict, "verdict-timeout",
           "how long a rank that reported a failure waits for the room's verdict")
      .add(limits.heartbeat, "heartbeat-interval",
           "how often the decider pings the ranks of its undecided rooms")
      .add(limits.heartbeat_misses, "heartbeat-misses",
           "unanswered pings in a row after which a rank is declared lost")
      .add(log_level, "log-level", "trace, debug, info, warn, error or off");
}

}  // namespace kvferry
