// judge_join (actors/decision/join_effects.hpp): every branch of what a
// room_join does to its room, and the precedence of the causes.
#include <catch2/catch.hpp>

#include "actors/decision/join_effects.hpp"

using namespace kvferry;

TEST_CASE("join effects: a decided room only learns its verdict", "[join_effects]") {
  join_facts f;
  f.decided = true;
  f.new_room = true;
  f.at_admission_limit = true;
  f.member_missing = true;
  f.prefill_lost = true;
  f.reported_before = true;
  CHECK(judge_join(f) == join_effects{});
}

TEST_CASE("join effects: a new room beyond the limit is refused without a lease check",
          "[join_effects]") {
  join_facts f;
  f.new_room = true;
  f.at_admission_limit = true;
  f.member_missing = true;  // the refusal comes first: the room never ran
  CHECK(judge_join(f) == join_effects{join_failure::overloaded, false});
  // A known room is not refused at the limit: it was admitted already.
  f.new_room = false;
  CHECK(judge_join(f).fail_with == join_failure::member_missing);
  f.member_missing = false;
  CHECK(judge_join(f) == join_effects{});
}

TEST_CASE("join effects: the causes in their order, each after the lease", "[join_effects]") {
  join_facts f;
  f.new_room = true;
  f.reported_before = true;
  CHECK(judge_join(f) == join_effects{join_failure::reported_before, true});
  f.prefill_lost = true;
  CHECK(judge_join(f) == join_effects{join_failure::prefill_lost, true});
  f.member_missing = true;
  CHECK(judge_join(f) == join_effects{join_failure::member_missing, true});
}

TEST_CASE("join effects: a room with nothing against it waits", "[join_effects]") {
  join_facts f;
  CHECK(judge_join(f) == join_effects{});
  f.new_room = true;
  CHECK(judge_join(f).fail_with == join_failure::none);
  CHECK(std::string{to_string(join_failure::prefill_lost)} == "prefill_lost");
}
