// The newest incarnation of each peer instance, by direct calls: a newer
// generation replaces, an older one is stale and refused with both numbers,
// and instances are tracked apart.
#include <catch2/catch.hpp>

#include "actors/rank/incarnations.hpp"

using namespace kvferry;

namespace {

rank_ref prefill(uint64_t generation, uint32_t tp = 0, std::string instance = "p") {
  return rank_ref{role::prefill, std::move(instance), generation, tp, 0};
}

const rank_ref self_rank{role::decode, "d", 1, 0, 0};

}  // namespace

TEST_CASE("incarnations learns the first generation and its repeats quietly",
          "[logic][generation]") {
  incarnations seen;
  auto c = seen.note(prefill(5));
  CHECK_FALSE(c.older);
  CHECK_FALSE(c.replaced);
  c = seen.note(prefill(5, 1));  // another rank of the same incarnation
  CHECK_FALSE(c.older);
  CHECK_FALSE(c.replaced);
  CHECK_FALSE(seen.stale(prefill(5), self_rank));
}

TEST_CASE("incarnations replaces an older generation and names it once", "[logic][generation]") {
  incarnations seen;
  seen.note(prefill(5));
  auto c = seen.note(prefill(7));
  CHECK(c.replaced);
  CHECK(c.previous == 5);
  CHECK_FALSE(c.older);
  auto why = incarnations::restarted(prefill(7), c.previous, self_rank);
  c = seen.note(prefill(7, 1));
  CHECK_FALSE(c.replaced);  // already the newest
  CHECK(why.code == errc::instance_restarted);
  CHECK(why.cause == "p restarted: generation 7 replaced generation 5");
  CHECK(why.origin == self_rank);
}

TEST_CASE("incarnations refuses what still comes from a replaced generation",
          "[logic][generation]") {
  incarnations seen;
  seen.note(prefill(7));
  auto c = seen.note(prefill(5));
  CHECK(c.older);
  CHECK_FALSE(c.replaced);
  auto again = seen.note(prefill(7));
  CHECK_FALSE(again.replaced);  // the older one did not replace the newest
  auto why = seen.stale(prefill(5, 1), self_rank);
  REQUIRE(why);
  CHECK(why->code == errc::instance_restarted);
  CHECK(why->cause ==
        to_string(prefill(5, 1)) + " is of generation 5 of p, which generation 7 replaced");
  CHECK(why->origin == self_rank);
  CHECK_FALSE(seen.stale(prefill(7), self_rank));
  CHECK_FALSE(seen.stale(prefill(8), self_rank));  // newer than known: not stale (yet noted)
}

TEST_CASE("incarnations keeps instances apart and knows nothing of unseen ones",
          "[logic][generation]") {
  incarnations seen;
  seen.note(prefill(7, 0, "p"));
  CHECK_FALSE(seen.stale(prefill(1, 0, "q"), self_rank));  // never seen: nothing to refuse
  auto c = seen.note(prefill(1, 0, "q"));
  CHECK_FALSE(c.older);
  CHECK_FALSE(c.replaced);
  CHECK(seen.stale(prefill(6, 0, "p"), self_rank));
  CHECK_FALSE(seen.stale(prefill(6, 0, "q"), self_rank));
}
