// The one timer an actor keeps over a deadline_book: set it when the book
// says so (a new earliest deadline, or the next one after a tick).
#pragma once

#include <algorithm>
#include <optional>

#include <caf/actor_clock.hpp>

namespace kvferry {

/// Sends `tick` to `self` at `at`, if the book asked for a timer (`at` set).
template <class Self, class Tick>
void set_timer(Self* self, std::optional<caf::actor_clock::time_point> at, Tick tick) {
  if (!at)
    return;
  auto now = self->clock().now();
  self->delayed_send(self, std::max(*at - now, caf::actor_clock::duration_type{0}), tick);
}

}  // namespace kvferry
