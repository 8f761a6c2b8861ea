// What a rank does when a room that waits for its verdict runs past its
// deadline, as a value (issue 33, step 1): decider_side's verdict_overdue
// only does what this says.
#pragma once

#include <cstdint>

namespace kvferry {

/// How many times a rank waits again for a late decider still heard from.
constexpr uint32_t max_verdict_extensions = 2;

enum class overdue_action : uint8_t {
  remind,         ///< the decider, heard from, hears why and decides for everyone
  check_decider,  ///< a silent decider: the silence check concludes, with every rank's words
  settle,         ///< no decider, or waited enough: the room concludes here, alone
};

/// The action for a room whose verdict is overdue for the `extension`-th
/// time (1 the first), given whether it has a decider and whether that
/// decider is still heard from. A silent one gets one wait more than a live
/// one: the silence check needs a heartbeat to conclude.
constexpr overdue_action overdue_action_for(bool has_decider, bool decider_alive,
                                            uint32_t extension) {
  if (!has_decider)
    return overdue_action::settle;
  if (decider_alive)
    return extension <= max_verdict_extensions ? overdue_action::remind : overdue_action::settle;
  return extension <= max_verdict_extensions + 1 ? overdue_action::check_decider
                                                 : overdue_action::settle;
}

}  // namespace kvferry
