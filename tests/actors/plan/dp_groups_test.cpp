// DP attention's plain logic: group shapes, group names, the pairing of two
// instances group to group, and SGLang's order for a room's prefill group
// (given, dp 1, room % dp, else ask the bootstrap).
#include <catch2/catch.hpp>

#include <map>

#include "actors/plan/dp_groups.hpp"
#include "actors/plan/tp_mapping.hpp"

using namespace kvferry;

TEST_CASE("dp groups: a dp that does not divide tp is refused, naming both", "[plan][dp]") {
  CHECK_FALSE(validate(dp_shape{8, 8}, "prefill"));
  CHECK_FALSE(validate(dp_shape{16, 4}, "decode"));
  CHECK(dp_shape{16, 4}.attn_tp() == 4);
  auto bad = validate(dp_shape{4, 3}, "prefill");
  REQUIRE(bad);
  CHECK_THAT(*bad, Catch::Contains("prefill tp = 4, dp = 3"));
  CHECK_THAT(*bad, Catch::Contains("divides tp"));
  auto zero = validate(dp_shape{4, 0}, "decode");
  REQUIRE(zero);
  CHECK_THAT(*zero, Catch::Contains("decode tp = 4, dp = 0"));
}

TEST_CASE("dp groups: the mixed shapes pair group to group", "[plan][dp]") {
  // prefill TP 8 DP 8 -> decode TP 16 DP 16: groups of 1 to groups of 1.
  CHECK_FALSE(check_dp_pair({8, 8}, 1, {16, 16}, 1));
  // prefill DP 1 -> decode DP 4: TP 8 to groups of 4 (fan-in 2 per group).
  CHECK_FALSE(check_dp_pair({8, 1}, 1, {16, 4}, 1));
  // TP 4 DP 4 -> TP 8 DP 8: the demo's shape.
  CHECK_FALSE(check_dp_pair({4, 4}, 1, {8, 8}, 1));
  // Groups of 3 and of 2 cannot map: refused naming both shapes.
  auto bad = check_dp_pair({6, 2}, 1, {4, 2}, 1);
  REQUIRE(bad);
  CHECK_THAT(*bad, Catch::Contains("prefill tp = 6, dp = 2 (groups of 3)"));
  CHECK_THAT(*bad, Catch::Contains("decode tp = 4, dp = 2 (groups of 2)"));
  CHECK_THAT(*bad, Catch::Contains("one TP size must divide the other"));
  auto split = check_dp_pair({8, 8}, 1, {6, 4}, 1);
  REQUIRE(split);
  CHECK_THAT(*split, Catch::Contains("decode tp = 6, dp = 4"));
}

TEST_CASE("dp groups: every decode rank of a group is fed from its prefill group alone",
          "[plan][dp]") {
  // The group-level mapping is tp_mapping's, over attention TPs: every
  // prefill rank of the group takes part, and none of another group could
  // be named (the sources' tp indices stay below the group's size).
  for (auto [p, d] :
       {std::pair{dp_shape{8, 1}, dp_shape{16, 4}}, std::pair{dp_shape{8, 8}, dp_shape{16, 16}},
        std::pair{dp_shape{4, 2}, dp_shape{8, 8}}}) {
    CAPTURE(p.tp, p.dp, d.tp, d.dp);
    REQUIRE_FALSE(check_dp_pair(p, 1, d, 1));
    for (bool mla : {false, true}) {
      std::map<uint32_t, uint32_t> named;
      for (uint32_t r = 0; r < d.attn_tp(); ++r)
        for (auto& s : sources_of({p.attn_tp(), 1}, {d.attn_tp(), 1}, r, 0, mla, 8)) {
          CHECK(s.tp < p.attn_tp());
          ++named[s.tp];
        }
      CHECK(named.size() == p.attn_tp());
    }
  }
}

TEST_CASE("dp groups: names", "[plan][dp]") {
  CHECK(dp_group_instance("prefill-0", 0, 1) == "prefill-0");
  CHECK(dp_group_instance("prefill-0", 2, 4) == "prefill-0/dp2");
}

TEST_CASE("dp groups: a room's prefill group in SGLang's order", "[plan][dp]") {
  SECTION("given first, checked against dp") {
    auto c = prefill_dp_group(17, 4, 2);
    CHECK(c.ok());
    CHECK(c.kind == dp_choice_kind::given);
    CHECK(c.group == 2);
    auto out = prefill_dp_group(17, 4, 4);
    CHECK_FALSE(out.ok());
    CHECK_THAT(out.error, Catch::Contains("prefill_dp_rank = 4 for room 17, expected 0..3"));
    CHECK_FALSE(prefill_dp_group(17, 4, -1).ok());
    // Given beats dp 1 too: a router's 0 on a one-group instance is fine, 1 is not.
    CHECK(prefill_dp_group(5, 1, 0).ok());
    CHECK_FALSE(prefill_dp_group(5, 1, 1).ok());
  }
  SECTION("dp 1: group 0") {
    auto c = prefill_dp_group(17, 1, std::nullopt, false);
    CHECK(c.kind == dp_choice_kind::single);
    CHECK(c.group == 0);
  }
  SECTION("room % dp when following the bootstrap room") {
    for (uint64_t room : {0ull, 1ull, 7ull, 1234567ull}) {
      auto c = prefill_dp_group(room, 4, std::nullopt);
      CHECK(c.kind == dp_choice_kind::room_modulo);
      CHECK(c.group == room % 4);
    }
  }
  SECTION("else the bootstrap is asked") {
    auto c = prefill_dp_group(9, 4, std::nullopt, false);
    CHECK(c.ok());
    CHECK(c.kind == dp_choice_kind::ask_bootstrap);
    CHECK(std::string{to_string(c.kind)} == "ask_bootstrap");
  }
}
