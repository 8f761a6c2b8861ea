#include <catch2/catch.hpp>

#include "actors/common/durations.hpp"
#include "actors/rank/room_fsm.hpp"

using namespace kvferry;
using namespace std::chrono_literals;

namespace {

deadlines limits() {
  deadlines d;
  d.bootstrapping = 10s;
  d.waiting_for_input = 20s;
  d.transferring = 30s;
  d.verdict = 5s;
  return d;
}

}  // namespace

TEST_CASE("room_fsm moves up only - and arms each state's deadline", "[logic][fsm]") {
  room_fsm fsm{limits()};
  CHECK(fsm.state() == kv_poll::bootstrapping);
  auto t = fsm.take_timer();
  REQUIRE(t);
  CHECK(t->after == 10s);
  CHECK_FALSE(fsm.take_timer());  // handed out once

  REQUIRE(fsm.advance(kv_poll::waiting_for_input));
  t = fsm.take_timer();
  REQUIRE(t);
  CHECK(t->after == 20s);
  CHECK_FALSE(fsm.is_current(t->epoch - 1));
  CHECK(fsm.is_current(t->epoch));

  CHECK_FALSE(fsm.advance(kv_poll::bootstrapping));      // never down
  CHECK_FALSE(fsm.advance(kv_poll::waiting_for_input));  // not above
  CHECK_FALSE(fsm.advance(kv_poll::success));            // only succeed() concludes
  CHECK_FALSE(fsm.advance(kv_poll::failed));             // only fail() concludes
  REQUIRE(fsm.advance(kv_poll::transferring));
  CHECK(fsm.take_timer()->after == 30s);

  fsm.touch();  // progress re-arms
  auto again = fsm.take_timer();
  REQUIRE(again);
  CHECK(again->after == 30s);

  REQUIRE(fsm.succeed());
  CHECK(fsm.state() == kv_poll::success);
  CHECK_FALSE(fsm.take_timer());
  CHECK_FALSE(fsm.is_current(again->epoch));
  CHECK_FALSE(fsm.fail(failure{errc::aborted, "late", {}}));
  CHECK(fsm.state() == kv_poll::success);
}

TEST_CASE("room_fsm: Failed is sticky and keeps the first cause", "[logic][fsm]") {
  room_fsm fsm{limits()};
  REQUIRE(fsm.fail(failure{errc::deadline, "first", {}}));
  CHECK_FALSE(fsm.fail(failure{errc::aborted, "second", {}}));
  CHECK_FALSE(fsm.succeed());
  CHECK_FALSE(fsm.advance(kv_poll::transferring));
  CHECK(fsm.state() == kv_poll::failed);
  CHECK(fsm.why().cause == "first");
  fsm.touch();
  CHECK_FALSE(fsm.take_timer());
}

TEST_CASE("room_fsm: awaiting a verdict swaps in the verdict deadline", "[logic][fsm]") {
  room_fsm fsm{limits()};
  fsm.advance(kv_poll::transferring);
  (void)fsm.take_timer();
  fsm.await_verdict();
  auto t = fsm.take_timer();
  REQUIRE(t);
  CHECK(t->after == 5s);
  fsm.touch();  // progress no longer re-arms the state deadline
  CHECK_FALSE(fsm.take_timer());
  CHECK(fsm.is_current(t->epoch));
  CHECK(fsm.stuck_cause(room_key{4, 2}) ==
        "room 4#2 got no verdict from its decider within 5s after reporting a failure in "
        "Transferring");
}

TEST_CASE("room_fsm names the state a room was stuck in", "[logic][fsm]") {
  room_fsm fsm{limits()};
  CHECK(fsm.stuck_cause(room_key{42, 7}) ==
        "room 42#7 stayed in Bootstrapping past its 10s deadline");
  fsm.advance(kv_poll::waiting_for_input);
  CHECK(fsm.stuck_cause(room_key{42, 0}) ==
        "room 42 stayed in WaitingForInput past its 20s deadline");
}

TEST_CASE("durations print in the unit that reads best", "[logic][fsm]") {
  CHECK(format_duration(300s) == "5min");
  CHECK(format_duration(90s) == "90s");
  CHECK(format_duration(1234ms) == "1.234s");
  CHECK(format_duration(1500ms) == "1.5s");
  CHECK(format_duration(250ms) == "250ms");
  CHECK(format_duration(40us) == "40us");
}
