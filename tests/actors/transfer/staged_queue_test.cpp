// The staged queue of a transfer actor, by direct calls: per-peer order, the
// cut of a room's later chunks, and the order a pass visits.
#include <catch2/catch.hpp>

#include "actors/transfer/staged_queue.hpp"

using namespace kvferry;

namespace {

const rank_ref d0{role::decode, "d", 1, 0, 0};
const rank_ref d1{role::decode, "d", 1, 1, 0};

}  // namespace

TEST_CASE("staged_queue keeps each peer's jobs in ask order", "[logic][transfer][staging]") {
  staged_queue q;
  q.push(d0, 5, {7, 1});
  q.push(d1, 2, {8, 1});
  q.push(d0, 3, {9, 1});
  CHECK(q.waiting(d0) == std::vector<uint64_t>{5, 3});  // as pushed, not sorted
  CHECK(q.waiting(d1) == std::vector<uint64_t>{2});
  CHECK(q.size() == 3);
  CHECK(q.contains(d0, 5));
  CHECK_FALSE(q.contains(d1, 5));  // per peer
  CHECK(q.waiting({role::decode, "other", 1, 0, 0}).empty());
}

TEST_CASE("staged_queue visits every peer's jobs oldest id first", "[logic][transfer][staging]") {
  staged_queue q;
  q.push(d1, 4, {8, 1});
  q.push(d0, 5, {7, 1});
  q.push(d0, 1, {7, 1});
  q.push(d1, 2, {8, 1});
  auto order = q.oldest_first();
  REQUIRE(order.size() == 4);
  CHECK(order[0] == staged_queue::waiting_job{1, d0});
  CHECK(order[1] == staged_queue::waiting_job{2, d1});
  CHECK(order[2] == staged_queue::waiting_job{4, d1});
  CHECK(order[3] == staged_queue::waiting_job{5, d0});
}

TEST_CASE("staged_queue removes a job once", "[logic][transfer][staging]") {
  staged_queue q;
  q.push(d0, 1, {7, 1});
  q.push(d0, 2, {7, 1});
  CHECK_FALSE(q.remove(d1, 1));  // not that peer's
  CHECK(q.remove(d0, 1));
  CHECK_FALSE(q.remove(d0, 1));
  CHECK(q.waiting(d0) == std::vector<uint64_t>{2});
}

TEST_CASE("staged_queue cuts a job with the later chunks of its room, and nothing else",
          "[logic][transfer][staging]") {
  staged_queue q;
  q.push(d0, 1, {7, 1});  // an earlier chunk of the room stays
  q.push(d0, 2, {8, 1});
  q.push(d0, 3, {7, 1});  // the one that fails
  q.push(d0, 4, {8, 1});
  q.push(d0, 5, {7, 1});  // behind it, same room: cut
  q.push(d0, 6, {7, 2});  // same id, another generation: another room
  q.push(d1, 7, {7, 1});  // same room, another peer: stays
  CHECK(q.cut(d0, 3) == std::vector<uint64_t>{3, 5});
  CHECK(q.waiting(d0) == std::vector<uint64_t>{1, 2, 4, 6});
  CHECK(q.waiting(d1) == std::vector<uint64_t>{7});
  // A job no longer queued (or of an unknown peer) is cut alone.
  CHECK(q.cut(d0, 3) == std::vector<uint64_t>{3});
  CHECK(q.cut({role::decode, "x", 1, 0, 0}, 9) == std::vector<uint64_t>{9});
  CHECK(q.size() == 5);
}

TEST_CASE("staged_queue forgets a peer's queue alone", "[logic][transfer][staging]") {
  staged_queue q;
  q.push(d0, 1, {7, 1});
  q.push(d1, 2, {7, 1});
  q.forget(d0);
  CHECK(q.waiting(d0).empty());
  CHECK(q.size() == 1);
  CHECK(q.oldest_first() == std::vector<staged_queue::waiting_job>{{2, d1}});
}
