#include "actors/process/config.hpp"

#include <chrono>

#include <caf/io/middleman.hpp>

#include "messages/type_registry.hpp"

namespace kvferry {

void prepare(caf::actor_system_config& cfg) {
  register_types(cfg);
  cfg.load<caf::io::middleman>();
  cfg.set("middleman.heartbeat-interval", caf::timespan{std::chrono::seconds{1}});
  cfg.set("middleman.connection-timeout", caf::timespan{std::chrono::seconds{10}});
  // CAF's default lets a scheduled actor run until its mailbox is empty: a
  // rank behind a burst of thousands of rooms then holds one of the
  // scheduler's threads for seconds, and a ping to any other actor waits as
  // long, urgent or not (a burst read as deaths). An actor gives its thread
  // back after this many messages; the urgent ones (heartbeats) come first
  // in each of its turns.
  cfg.set("scheduler.max-throughput", size_t{64});
}

config::config() {
  prepare(*this);
  // CAF's shared-queue scheduler: a worker with nothing to do waits on a
  // condition variable instead of polling and sleeping in 50 us steps. On the
  // 2-core machine it took a one-page room's p50 across two processes from
  // 660 to 522 us and 64 rooms in flight from 7,800 to 8,500 rooms/s, with
  // less CPU per room (docs/PERFORMANCE.md, "Rooms per second"). A command
  // line or ini file may set --scheduler.policy=stealing again.
  set("scheduler.policy", caf::atom("sharing"));
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
           "heartbeat rounds in a row without an answer after which a rank is declared lost")
      .add(limits.max_rooms, "max-rooms",
           "rooms a decode instance holds undecided at once; one more fails at once (overloaded)")
      .add(log_level, "log-level", "trace, debug, info, warn, error or off");
}

}  // namespace kvferry
