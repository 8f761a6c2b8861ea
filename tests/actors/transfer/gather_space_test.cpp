// A prefill rank's gather space, by direct calls: first fit over the free
// gaps, bounds, and space that comes back.
#include <catch2/catch.hpp>

#include "actors/transfer/gather_space.hpp"

using namespace kvferry;

TEST_CASE("gather_space refuses nothing, too much, and space it has not got",
          "[logic][transfer][staging]") {
  gather_space space{100};
  CHECK(space.size() == 100);
  CHECK(space.idle());
  CHECK_FALSE(space.take(0));
  CHECK_FALSE(space.take(101));
  CHECK(space.take(100) == 0u);  // exactly the whole buffer
  CHECK_FALSE(space.idle());
  CHECK_FALSE(space.take(1));
  space.give(0);
  CHECK(space.idle());

  gather_space none;  // no gather buffer: every chunk takes the sliced path
  CHECK(none.size() == 0);
  CHECK_FALSE(none.take(1));
}

TEST_CASE("gather_space takes the first gap that fits", "[logic][transfer][staging]") {
  gather_space space{100};
  auto a = space.take(30);
  auto b = space.take(30);
  auto c = space.take(30);
  CHECK(a == 0u);
  CHECK(b == 30u);
  CHECK(c == 60u);
  CHECK_FALSE(space.take(20));  // 10 bytes left at the end
  space.give(30);               // a gap of 30 in the middle
  CHECK_FALSE(space.take(31));
  CHECK(space.take(10) == 30u);  // first fit, not best fit
  CHECK(space.take(20) == 40u);  // the rest of the gap, exactly
  CHECK(space.take(10) == 90u);  // the tail
  CHECK_FALSE(space.take(1));
  space.give(0);
  space.give(60);
  CHECK(space.take(30) == 0u);
  CHECK(space.take(30) == 60u);
}

TEST_CASE("gather_space ignores what it did not hand out", "[logic][transfer][staging]") {
  gather_space space{100};
  auto a = space.take(50);
  REQUIRE(a);
  space.give(7);   // no grant starts there
  space.give(50);  // nor there
  CHECK_FALSE(space.take(60));
  space.give(*a);
  space.give(*a);  // twice: nothing more
  CHECK(space.idle());
  CHECK(space.take(60) == 0u);
}
