// What is left of forgotten rooms, by direct calls: found by room id, the
// newest first, the oldest forgotten beyond the bound, and a room's index
// entry gone with its last value.
#include <catch2/catch.hpp>

#include <string>

#include "actors/common/tombstones.hpp"

using namespace kvferry;

TEST_CASE("tombstones find a room's newest value, or one a predicate picks",
          "[logic][tombstones]") {
  tombstones<std::string> t{8};
  t.bury(1, "1a");
  t.bury(2, "2a");
  t.bury(1, "1b");
  REQUIRE(t.newest(1));
  CHECK(*t.newest(1) == "1b");
  CHECK(*t.newest(2) == "2a");
  CHECK_FALSE(t.newest(3));
  auto* a = t.find(1, [](const std::string& v) { return v == "1a"; });
  REQUIRE(a);
  CHECK(*a == "1a");
  CHECK_FALSE(t.find(1, [](const std::string& v) { return v == "2a"; }));
  CHECK_FALSE(t.find(3, [](const std::string&) { return true; }));
  CHECK(t.size() == 3);
}

TEST_CASE("tombstones forget the oldest beyond the bound, room by room", "[logic][tombstones]") {
  tombstones<int> t{3};
  t.bury(1, 10);
  t.bury(1, 11);
  t.bury(2, 20);
  t.bury(3, 30);  // forgets room 1's 10
  CHECK(t.size() == 3);
  CHECK(*t.newest(1) == 11);
  CHECK_FALSE(t.find(1, [](int v) { return v == 10; }));
  t.bury(4, 40);  // forgets room 1's 11: room 1 is gone
  CHECK_FALSE(t.newest(1));
  CHECK(*t.newest(2) == 20);
  // Many rooms through a small bound: only the last three are found.
  for (int r = 100; r < 10100; ++r)
    t.bury(static_cast<uint64_t>(r), r);
  CHECK(t.size() == 3);
  CHECK_FALSE(t.newest(10096));
  CHECK(*t.newest(10097) == 10097);
  CHECK(*t.newest(10099) == 10099);
}

TEST_CASE("tombstones with a bound of zero keep nothing", "[logic][tombstones]") {
  tombstones<int> t{0};
  t.bury(1, 1);
  CHECK(t.size() == 0);
  CHECK_FALSE(t.newest(1));
}
