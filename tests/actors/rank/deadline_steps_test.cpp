// The rank's one deadline timer, through the steps both rank actors share
// (actors/rank/room_steps.hpp: publish, arm_deadline, deadlines_due), with a
// stand-in for the actor that records the timers it sets: a room armed again
// by progress its rank has not published yet (a staged chunk's touch) gets
// its newer deadline when the older one comes due, so no live room is ever
// without one; the current deadline then fires.
#include <catch2/catch.hpp>

#include <chrono>
#include <map>
#include <utility>
#include <vector>

#include "actors/common/deadline_book.hpp"
#include "actors/rank/room_steps.hpp"

using namespace kvferry;
using namespace std::chrono_literals;

namespace {

using time_point = caf::actor_clock::time_point;

struct stand_in_room {
  room_key k;
  room_fsm f;
  room_slot_ptr s;  // none: nothing to mirror
  const room_key& key() const { return k; }
  room_fsm& fsm() { return f; }
  const room_slot_ptr& slot() const { return s; }
};

struct stand_in_clock {
  time_point t{};
  time_point now() const { return t; }
};

/// What deadlines_due and publish need of a rank actor.
struct stand_in_rank {
  struct {
    std::map<uint64_t, stand_in_room> rooms;
    deadline_book<time_point> room_deadlines;
    struct {
      std::shared_ptr<metrics::rank_figures> figures;  // none kept
    } cfg;
    event_ring events;
  } state;
  stand_in_clock c;
  std::vector<time_point> timers_set;  // when each deadline_atom was asked for

  stand_in_clock& clock() { return c; }
  void delayed_send(stand_in_rank*, caf::actor_clock::duration_type after, deadline_atom) {
    timers_set.push_back(c.t + after);
  }
};

deadlines limits() {
  deadlines d;
  d.bootstrapping = 10s;
  d.waiting_for_input = 30s;
  return d;
}

}  // namespace

TEST_CASE("deadline steps: a room touched but not published gets its newer deadline, then fires",
          "[logic][rank][deadline]") {
  stand_in_rank rank;
  auto& room =
      rank.state.rooms.emplace(7, stand_in_room{{7, 1}, room_fsm{limits()}, nullptr}).first->second;
  publish(&rank, room.slot(), room.key(), room.fsm());  // Bootstrapping: 10 s
  REQUIRE(rank.timers_set == std::vector<time_point>{time_point{} + 10s});

  rank.c.t += 4s;
  room.fsm().advance(kv_poll::waiting_for_input);  // armed again for 30 s...
  room.fsm().touch();                              // ...and touched: not published
  std::vector<std::pair<uint64_t, uint64_t>> fired;
  auto on_deadline = [&](stand_in_rank*, uint64_t id, uint64_t epoch) {
    fired.emplace_back(id, epoch);
  };

  rank.c.t = time_point{} + 10s;  // the Bootstrapping deadline comes due: stale now
  deadlines_due(&rank, on_deadline);
  CHECK(fired.empty());
  REQUIRE(rank.state.room_deadlines.of(7));
  // 30 s from when the rank took it up (10 s): late by the wait it was not
  // published, but not lost.
  CHECK(*rank.state.room_deadlines.of(7) == time_point{} + 40s);
  REQUIRE(rank.timers_set.size() == 2);
  CHECK(rank.timers_set.back() == time_point{} + 40s);

  rank.c.t = time_point{} + 40s;
  deadlines_due(&rank, on_deadline);
  REQUIRE(fired.size() == 1);
  CHECK(fired[0].first == 7);
  CHECK(room.fsm().is_current(fired[0].second));
  CHECK_FALSE(rank.state.room_deadlines.of(7));
}

TEST_CASE("deadline steps: a concluded room's deadline is gone and fires nothing",
          "[logic][rank][deadline]") {
  stand_in_rank rank;
  auto& room =
      rank.state.rooms.emplace(9, stand_in_room{{9, 1}, room_fsm{limits()}, nullptr}).first->second;
  publish(&rank, room.slot(), room.key(), room.fsm());
  room.fsm().succeed();
  publish(&rank, room.slot(), room.key(), room.fsm());
  CHECK(rank.state.room_deadlines.size() == 0);
  rank.c.t += 60s;
  bool fired = false;
  deadlines_due(&rank, [&](stand_in_rank*, uint64_t, uint64_t) { fired = true; });
  CHECK_FALSE(fired);
}
