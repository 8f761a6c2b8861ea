// A rank's room deadlines behind one timer, by direct calls: one deadline per
// room (the last armed), due earliest first, gone with their room, and the
// timer set again only when it must go off earlier.
#include <catch2/catch.hpp>

#include <chrono>

#include "actors/common/deadline_book.hpp"

using namespace kvferry;
using clock_type = std::chrono::steady_clock;
using book = deadline_book<clock_type::time_point>;
using due = book::due;

namespace {

const clock_type::time_point t0{};

clock_type::time_point at(int s) {
  return t0 + std::chrono::seconds{s};
}

}  // namespace

TEST_CASE("deadline_book sets the timer for the first deadline and earlier ones only",
          "[logic][rank][deadline]") {
  book b;
  CHECK(b.arm(1, 1, at(30)) == at(30));  // no timer yet
  CHECK_FALSE(b.arm(2, 1, at(60)));      // the timer goes off before it
  CHECK(b.arm(3, 1, at(10)) == at(10));  // earlier: set again
  CHECK_FALSE(b.arm(4, 1, at(10)));      // as early: the timer set serves it
  CHECK(b.size() == 4);
}

TEST_CASE("deadline_book brings the deadlines due, earliest first, and sets the next timer",
          "[logic][rank][deadline]") {
  book b;
  b.arm(1, 7, at(30));
  b.arm(2, 8, at(10));
  b.arm(3, 9, at(20));
  auto early = b.fire(at(5));  // a timer set for a deadline replaced since
  CHECK(early.due_now.empty());
  CHECK_FALSE(early.set_timer);  // the one set for 10 s still goes off
  auto f = b.fire(at(20));
  CHECK(f.due_now == std::vector<due>{{2, 8}, {3, 9}});
  CHECK(f.set_timer == at(30));
  CHECK(b.size() == 1);
  auto last = b.fire(at(30));
  CHECK(last.due_now == std::vector<due>{{1, 7}});
  CHECK_FALSE(last.set_timer);
  CHECK(b.size() == 0);
}

TEST_CASE("deadline_book keeps one deadline per room: the last armed", "[logic][rank][deadline]") {
  book b;
  b.arm(1, 1, at(10));
  b.arm(1, 2, at(40));  // progress: the room's deadline moved, with a new epoch
  CHECK(b.size() == 1);
  CHECK(b.of(1) == at(40));
  auto f = b.fire(at(10));  // the timer set for the old deadline
  CHECK(f.due_now.empty());
  CHECK(f.set_timer == at(40));
  CHECK(b.fire(at(40)).due_now == std::vector<due>{{1, 2}});
}

TEST_CASE("deadline_book forgets a room's deadline when it concludes or leaves",
          "[logic][rank][deadline]") {
  book b;
  for (uint64_t room = 0; room < 1000; ++room)
    b.arm(room, 1, at(300));
  for (uint64_t room = 0; room < 1000; ++room)
    b.disarm(room);
  b.disarm(5);  // twice: nothing
  CHECK(b.size() == 0);
  CHECK_FALSE(b.of(5));
  CHECK(b.fire(at(300)).due_now.empty());
}
