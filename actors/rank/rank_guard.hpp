// What both rank actors (prefill and decode) do the same way around their
// handlers: name themselves in logs, answer the scheduler's messages only
// from this process, and turn an exception that escaped a handler into the
// failure of every live room.
//
// `Self` is a rank actor whose state has `cfg.self` (its rank_ref) and `rooms`
// (room id → room); `report(self, room, why)` fails one room on the rank.
#pragma once

#include <string>
#include <type_traits>
#include <utility>

#include <caf/sec.hpp>

#include "actors/base/guard.hpp"
#include "actors/base/log.hpp"
#include "actors/base/sender_check.hpp"
#include "messages/failure.hpp"
#include "messages/handles.hpp"

namespace kvferry {

/// "[prefill-0 tp1 pp0]": how a rank names itself in its logs.
template <class Self>
std::string who(Self* self) {
  return "[" + to_string(self->state.cfg.self) + "]";
}

/// `step()`, the rank's answer to the scheduler's message `what`, for a
/// sender in this process only (the scheduler's facade sends as the rank
/// itself). A stranger that found the rank's handle is dropped (logged once
/// per sender); a request from it gets unexpected_message.
template <class Self, class Step>
auto from_scheduler(Self* self, const char* what, Step step) -> decltype(step()) {
  if (from_this_process(self, who(self), what))
    return step();
  if constexpr (!std::is_void_v<decltype(step())>)
    return caf::make_error(caf::sec::unexpected_message);
}

/// An exception escaped a handler: every live room of this rank fails with
/// it (the decider tells the others), and the rank carries on.
template <class Self, class Report>
failure fail_live_rooms(Self* self, const std::string& what, Report report) {
  auto& st = self->state;
  log().error("{} exception in a handler: {}; failing its live rooms", who(self), what);
  failure why{errc::internal, "exception in " + to_string(st.cfg.self) + ": " + what, st.cfg.self};
  for (auto& [id, room] : st.rooms)
    report(self, room, why);
  return why;
}

}  // namespace kvferry
