// The rule of a staged pass, by direct calls: a job goes once granted, its
// slot consumed and gather space free; one that waits holds back only its
// room's later chunks; the oldest writable job keeps the gather space for
// itself; a grant outside the ring fails with both sizes.
#include <catch2/catch.hpp>

#include "actors/transfer/staged_pass.hpp"

using namespace kvferry;

namespace {

const rank_ref d0{role::decode, "d", 1, 0, 0};
const rank_ref d1{role::decode, "d", 1, 1, 0};
constexpr uint64_t ring = 1000;

/// A staged job of `room` for `bytes`, granted at ring `offset` (linear end
/// `end`), or not granted when `end` is 0.
transfer_job job(room_key room, uint64_t bytes, uint64_t offset = 0, uint64_t end = 0) {
  transfer_job j;
  j.meta.key = room;
  j.meta.src_pages = {1};
  j.staged = true;
  j.staged_bytes = bytes;
  if (end != 0)
    j.grant = staging_grant{room, 0, offset, end, 0};
  return j;
}

using step = staged_pass::step;

}  // namespace

TEST_CASE("a granted job whose slot was consumed goes with its gather space",
          "[logic][transfer][staging]") {
  gather_space space{500};
  staged_pass pass;
  auto d = pass.decide(d0, job({7, 1}, 200, 0, 200), ring, 0, space);
  CHECK(d.what == step::go);
  CHECK(d.gather_at == 0);
  d = pass.decide(d0, job({8, 1}, 200, 200, 400), ring, 0, space);
  CHECK(d.what == step::go);
  CHECK(d.gather_at == 200);  // the space of the first is still taken
}

TEST_CASE("a job waits for its grant and for the watermark, and holds back its room only",
          "[logic][transfer][staging]") {
  gather_space space{500};
  staged_pass pass;
  CHECK(pass.decide(d0, job({7, 1}, 100), ring, 0, space).what == step::wait);  // no grant
  // The later chunk of that room to that peer stays behind it, granted or not.
  CHECK(pass.decide(d0, job({7, 1}, 100, 100, 200), ring, 0, space).what == step::skip);
  // Another room, and the same room to another peer, go past.
  CHECK(pass.decide(d0, job({8, 1}, 100, 100, 200), ring, 0, space).what == step::go);
  CHECK(pass.decide(d1, job({7, 1}, 100, 0, 100), ring, 0, space).what == step::go);
  // A slot of the next round waits until the watermark frees it: end <= consumed + ring.
  staged_pass next;
  CHECK(next.decide(d0, job({9, 1}, 100, 100, 1200), ring, 199, space).what == step::wait);
  staged_pass later;
  CHECK(later.decide(d0, job({9, 1}, 100, 100, 1200), ring, 200, space).what == step::go);
}

TEST_CASE("a last chunk without pages goes with no ring write, unless its room is held back",
          "[logic][transfer][staging]") {
  gather_space space{500};
  staged_pass pass;
  auto tail = job({7, 1}, 0);
  tail.meta.src_pages.clear();
  CHECK(pass.decide(d0, tail, ring, 0, space).what == step::tail_only);
  CHECK(space.idle());
  CHECK(pass.decide(d0, job({7, 1}, 100), ring, 0, space).what == step::wait);
  CHECK(pass.decide(d0, tail, ring, 0, space).what == step::skip);  // order within the room
}

TEST_CASE("the oldest writable job without gather space keeps later ones from taking any",
          "[logic][transfer][staging]") {
  gather_space space{500};
  auto held = space.take(300);  // a bulk write still reads it
  REQUIRE(held);
  staged_pass pass;
  CHECK(pass.decide(d0, job({7, 1}, 400, 0, 400), ring, 0, space).what == step::wait);
  // 100 bytes would fit, but the large chunk is not starved by smaller ones.
  CHECK(pass.decide(d1, job({8, 1}, 100, 0, 100), ring, 0, space).what == step::wait);
  // A tail needs no space and still goes.
  auto tail = job({9, 1}, 0);
  tail.meta.src_pages.clear();
  CHECK(pass.decide(d0, tail, ring, 0, space).what == step::tail_only);
  // The next pass, after the space came back, lets the oldest go.
  space.give(*held);
  staged_pass next;
  CHECK(next.decide(d0, job({7, 1}, 400, 0, 400), ring, 0, space).what == step::go);
}

TEST_CASE("a grant outside the ring is a bad grant, named with both sizes",
          "[logic][transfer][staging]") {
  gather_space space{2000};
  staged_pass pass;
  auto past_end = job({7, 1}, 300, 800, 1100);  // 800 + 300 > 1000
  CHECK(pass.decide(d0, past_end, ring, 200, space).what == step::bad_grant);
  CHECK(space.idle());  // no gather space taken for it
  CHECK(staged_pass::bad_grant_cause(past_end, ring, d0) ==
        "staging grant at ring offset 800 for 300 bytes exceeds the ring of 1000 bytes of " +
            to_string(d0));
  CHECK(pass.decide(d0, job({8, 1}, 10, 1001, 1011), ring, 100, space).what == step::bad_grant);
  // A grant whose end is short of its bytes.
  CHECK(pass.decide(d0, job({9, 1}, 100, 0, 50), ring, 0, space).what == step::bad_grant);
  // Exactly to the end of the ring is fine.
  CHECK(pass.decide(d0, job({10, 1}, 100, 900, 1000), ring, 0, space).what == step::go);
}
