// missing_members (actors/decision/missing_members.hpp): the decode members a
// decider holds down, and the one cause every room fails with meanwhile.
#include <catch2/catch.hpp>

#include "actors/decision/missing_members.hpp"

using namespace kvferry;

namespace {

rank_ref member(uint32_t tp, uint64_t generation = 4) {
  return rank_ref{role::decode, "decode-0", generation, tp, 0};
}

}  // namespace

TEST_CASE("missing_members: the first cause of the member missing longest, until it is back",
          "[logic][decision]") {
  missing_members m;
  CHECK(m.empty());
  CHECK(m.cause() == nullptr);
  // 2026-12-03 08:44:49.351 UTC
  const int64_t t1 = 1796287489351000000;
  auto& first = m.went(member(1), "went down (exit_reason(kill))", t1);
  CHECK(first.code == errc::instance_incomplete);
  CHECK(first.origin == member(1));
  CHECK(first.cause ==
        "decode instance decode-0 is incomplete: decode-0 tp1 pp0 went down (exit_reason(kill)) "
        "at 2026-12-03 08:44:49.351 UTC; its rooms fail until it is back");
  // Missing again (a heartbeat loss after its death): the first cause stays.
  CHECK(m.went(member(1), "answered none of 5 heartbeats", t1 + 1000) == first);
  // A second member, later: rooms still name the first.
  m.went(member(0), "went down (exit_reason(kill))", t1 + 5'000'000'000);
  CHECK(m.size() == 2u);
  REQUIRE(m.cause());
  CHECK(*m.cause() == first);
  // Back under another generation: the place is what counts.
  CHECK(m.back(member(1, 9)));
  CHECK_FALSE(m.back(member(1)));
  REQUIRE(m.cause());
  CHECK(m.cause()->origin == member(0));
  CHECK(m.missing(member(0)));
  CHECK(m.back(member(0)));
  CHECK(m.cause() == nullptr);
}
