// A room's recent history on one rank, for `kvferry-ctl trace ROOM`: each
// rank keeps a bounded ring of room events (actors/common/event_ring.hpp) and
// answers trace_atom with those of one room; kvferry-ctl gathers them from
// every rank of both instances into one timeline.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/atom.hpp>
#include <caf/meta/type_name.hpp>

namespace kvferry {

using trace_atom = caf::atom_constant<caf::atom("trace")>;
constexpr trace_atom trace_atom_v{};

/// One thing that happened to a room on a rank.
struct room_event {
  uint64_t room = 0;
  uint64_t generation = 0;  ///< 0 before the decider keyed it
  int64_t wall_ns = 0;      ///< system clock (ns since the Unix epoch): across processes
  int64_t mono_ns = 0;      ///< steady clock of its process: within one rank
  std::string rank;         ///< "decode-0 tp1 pp0"
  /// "Bootstrapping", "WaitingForInput", "Transferring", "Success", "Failed",
  /// "chunk 3 landed (16 pages)", "reported to the decider", "verdict Failed"...
  std::string what;
  std::string cause;  ///< the failure, rendered ("deadline: ... (from ...)"), where there is one

  friend bool operator==(const room_event&, const room_event&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, room_event& x) {
  return f(caf::meta::type_name("kvferry.room_event"), x.room, x.generation, x.wall_ns, x.mono_ns,
           x.rank, x.what, x.cause);
}

/// A rank's answer to trace_atom: its events of one room, oldest first (none
/// when the room left its ring, or never came).
struct room_trace {
  std::string rank;
  std::vector<room_event> events;

  friend bool operator==(const room_trace&, const room_trace&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, room_trace& x) {
  return f(caf::meta::type_name("kvferry.room_trace"), x.rank, x.events);
}

}  // namespace kvferry
