// overdue_action_for, branch by branch: a room past its verdict's deadline
// reminds a live decider a few times, waits one heartbeat more for a silent
// one's silence check, and otherwise concludes alone (issue 33, step 1).
#include <catch2/catch.hpp>

#include "actors/rank/overdue_action.hpp"

using namespace kvferry;

TEST_CASE("overdue_action_for: remind, check the decider, or settle", "[logic][rank]") {
  for (uint32_t n : {0u, 1u, 5u})
    CHECK(overdue_action_for(false, false, n) == overdue_action::settle);
  for (uint32_t n = 1; n <= max_verdict_extensions; ++n) {
    CAPTURE(n);
    CHECK(overdue_action_for(true, true, n) == overdue_action::remind);
    CHECK(overdue_action_for(true, false, n) == overdue_action::check_decider);
  }
  CHECK(overdue_action_for(true, true, max_verdict_extensions + 1) == overdue_action::settle);
  CHECK(overdue_action_for(true, false, max_verdict_extensions + 1) ==
        overdue_action::check_decider);
  CHECK(overdue_action_for(true, false, max_verdict_extensions + 2) == overdue_action::settle);
  static_assert(overdue_action_for(true, true, 1) == overdue_action::remind);
}
