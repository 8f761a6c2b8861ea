// kvferry-ctl trace ROOM: one room's history across every rank of the
// cluster. Each node's status actor names its ranks' actors; each rank
// answers with its recent events of the room (messages/room_trace.hpp, a
// bounded ring per rank); they are merged into one timeline by wall clock,
// with where the time went (handshake, waiting for input, each chunk, the
// verdict) and, for a failed room, its first cause and how the verdict
// travelled to each rank.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>

#include "apps/ctl/cluster_status.hpp"
#include "messages/room_trace.hpp"

namespace kvferry::ctl {

struct room_timeline {
  uint64_t room = 0;
  std::vector<room_event> events;   ///< every rank's, by wall clock
  std::vector<std::string> ranks;   ///< ranks that answered
  std::vector<std::string> missed;  ///< "RANK: why" for ranks that did not
};

/// Asks every rank of `v`'s nodes (each within `timeout`) for room `room`.
room_timeline gather_trace(caf::actor_system& sys, const cluster_view& v, uint64_t room,
                           caf::timespan timeout);

/// The timeline for people.
void print_trace(std::ostream& out, const room_timeline& t);

/// The same as one JSON object, for tools.
void print_trace_json(std::ostream& out, const room_timeline& t);

}  // namespace kvferry::ctl
