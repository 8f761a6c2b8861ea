// Heartbeat bookkeeping, by direct calls: one ping out at a time, misses in a
// row (a round late or a ping given up), lost exactly once, alive again on an answer, forgotten
// when unwatched.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "actors/decision/liveness.hpp"

using namespace kvferry;

using standing = liveness<std::string>::standing;

TEST_CASE("liveness lets one ping out at a time", "[logic][heartbeat]") {
  liveness<std::string> l{3};
  CHECK_FALSE(l.watching("a"));
  CHECK(l.ping("a"));
  CHECK(l.watching("a"));
  CHECK_FALSE(l.ping("a"));  // the first is still out
  l.answered("a");
  CHECK(l.ping("a"));
  CHECK(l.missed("a") == standing::alive);
  CHECK(l.ping("a"));  // a miss frees the slot too
}

TEST_CASE("liveness declares a peer lost on the last allowed miss, once", "[logic][heartbeat]") {
  liveness<std::string> l{3};
  CHECK(l.misses() == 3);
  l.ping("a");
  CHECK(l.missed("a") == standing::alive);
  l.ping("a");
  CHECK(l.missed("a") == standing::alive);
  CHECK_FALSE(l.lost("a"));
  l.ping("a");
  CHECK(l.missed("a") == standing::newly_lost);
  CHECK(l.lost("a"));
  l.ping("a");
  CHECK(l.missed("a") == standing::still_lost);  // reported once
  CHECK(l.missed("a") == standing::still_lost);
}

TEST_CASE("liveness counts misses in a row: an answer starts over and revives",
          "[logic][heartbeat]") {
  liveness<std::string> l{2};
  l.ping("a");
  CHECK(l.missed("a") == standing::alive);
  l.answered("a");  // the count starts over
  l.ping("a");
  CHECK(l.missed("a") == standing::alive);
  l.ping("a");
  CHECK(l.missed("a") == standing::newly_lost);
  l.answered("a");  // a lost peer that answers is alive again
  CHECK_FALSE(l.lost("a"));
  l.ping("a");
  CHECK(l.missed("a") == standing::alive);
  l.ping("a");
  CHECK(l.missed("a") == standing::newly_lost);  // and may be lost again
}

TEST_CASE(
    "liveness: a round that finds the ping still out is a miss, and a late answer still counts",
    "[logic][heartbeat]") {
  liveness<std::string> l{3};
  CHECK(l.ping("a"));
  CHECK(l.late("a") == standing::alive);
  CHECK_FALSE(l.ping("a"));  // still out: no second ping
  CHECK(l.late("a") == standing::alive);
  l.answered("a");  // late, but within the silence: alive, the count starts over
  CHECK(l.ping("a"));
  CHECK(l.late("a") == standing::alive);
  CHECK(l.late("a") == standing::alive);
  CHECK(l.late("a") == standing::newly_lost);    // a whole silence without an answer
  CHECK_FALSE(l.ping("a"));                      // its ping is still out
  CHECK(l.missed("a") == standing::still_lost);  // then given up: it may be probed
  CHECK(l.ping("a"));
  l.answered("a");
  CHECK_FALSE(l.lost("a"));
}

TEST_CASE("liveness allows at least one miss and ignores peers it does not watch",
          "[logic][heartbeat]") {
  liveness<std::string> l{0};
  CHECK(l.misses() == 1);
  l.ping("a");
  CHECK(l.missed("a") == standing::newly_lost);
  CHECK(l.missed("b") == standing::alive);  // never pinged: not watched
  CHECK_FALSE(l.watching("b"));
  l.answered("b");  // an answer from no one watched adds nobody
  CHECK_FALSE(l.watching("b"));
  CHECK_FALSE(l.lost("b"));
}

TEST_CASE("liveness forgets the peers it no longer watches", "[logic][heartbeat]") {
  liveness<std::string> l{1};
  l.ping("a");
  l.ping("b");
  l.missed("b");
  REQUIRE(l.lost("b"));
  l.retain({"a"});
  CHECK(l.size() == 1);
  CHECK_FALSE(l.watching("b"));
  CHECK_FALSE(l.lost("b"));
  CHECK(l.missed("b") == standing::alive);  // a late timer for it changes nothing
  CHECK(l.ping("b"));                       // watched anew, from zero
  CHECK(l.missed("b") == standing::newly_lost);
  CHECK_FALSE(l.ping("a"));  // a's ping is still out: retain kept its state
}
