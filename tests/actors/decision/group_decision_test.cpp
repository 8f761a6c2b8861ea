#include <catch2/catch.hpp>

#include "actors/decision/group_decision.hpp"

using namespace kvferry;

namespace {

rank_ref p0{role::prefill, "p", 1, 0, 0};
rank_ref p1{role::prefill, "p", 1, 1, 0};
rank_ref d0{role::decode, "d", 2, 0, 0};

}  // namespace

TEST_CASE("a room succeeds only when every participant finished", "[logic][decision]") {
  group_decision g;
  g.add_participant(p0);
  g.add_participant(p1);
  g.add_participant(d0);
  CHECK_FALSE(g.finish(p0));
  CHECK_FALSE(g.finish(p0));  // twice counts once
  CHECK_FALSE(g.finish(d0));
  CHECK_FALSE(g.decided());
  auto v = g.finish(p1);
  REQUIRE(v);
  CHECK(v->outcome == kv_poll::success);
  CHECK(g.decided());
  // Decided once: a late failure changes nothing.
  CHECK_FALSE(g.fail(failure{errc::aborted, "late", p0}));
  CHECK(g.outcome()->outcome == kv_poll::success);
}

TEST_CASE("the first failure decides - later ones are ignored", "[logic][decision]") {
  group_decision g;
  g.add_participant(p0);
  g.add_participant(d0);
  g.finish(p0);
  auto v = g.fail(failure{errc::transfer_failed, "tcp write failed", p0});
  REQUIRE(v);
  CHECK(v->outcome == kv_poll::failed);
  CHECK(v->why.origin == p0);
  CHECK_FALSE(g.fail(failure{errc::deadline, "later", d0}));
  CHECK_FALSE(g.finish(d0));
  CHECK(g.outcome()->why.cause == "tcp write failed");
}

TEST_CASE("a finish from outside the group does not count", "[logic][decision]") {
  group_decision g;
  g.add_participant(d0);
  CHECK_FALSE(g.finish(p1));
  CHECK(g.finished().empty());
  CHECK(g.finish(d0));
}
