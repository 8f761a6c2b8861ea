// Heartbeats: a rank or a decider that goes silent without dropping its
// connection (a frozen process, a partition) is declared lost in bounded
// time, and every other rank of the room concludes Failed with the same
// cause. A frozen rank that wakes up concludes the same too, and later rooms
// succeed. Time is the coordinator's: frozen actors simply do not run.
#include "tests/support/instance_fixture.hpp"

using namespace kvferry;
using namespace kvferry::test;
using namespace std::chrono_literals;

namespace {

struct heartbeat_fixture : instance_fixture {
  /// Every rank's view of room `h`: (state, failure) by rank index, prefill first.
  struct view {
    kv_poll state;
    std::optional<transfer_error> error;
  };
  std::vector<view> views(room_handles& h) {
    std::vector<view> out;
    for (auto& s : h.senders)
      out.push_back({s.poll(), s.failure()});
    for (auto& r : h.receivers)
      out.push_back({r.poll(), r.failure()});
    return out;
  }

  /// Opens a room on every rank and sends its first chunk only: it stays in
  /// Transferring.
  room_handles half_sent(uint64_t id) {
    room_handles h;
    for (auto& r : decode) {
      h.receivers.push_back(r.rt->make_receiver(id, where()));
      h.receivers.back().init({5, 6, 7, 8}, 1);
    }
    for (auto& r : prefill) {
      r.pool->fill_room(seed, id, {1, 2, 3, 4}, 1);
      h.senders.push_back(r.rt->make_sender(id));
      h.senders.back().init(4, 1);
      h.senders.back().send({1, 2}, false);
    }
    sched.run();
    return h;
  }

  void finish_sending(room_handles& h) {
    for (auto& s : h.senders)
      s.send({3, 4}, true);
  }
};

}  // namespace

TEST_CASE_METHOD(heartbeat_fixture, "a frozen rank is declared lost by every other rank",
                 "[actors][heartbeat]") {
  auto at = GENERATE(0u, 1u, 2u, 3u);  // prefill tp0, tp1, decode tp0, tp1
  CAPTURE(at);
  start(2, 1, 2, 1);
  auto h = half_sent(40);
  for (auto& v : views(h))
    REQUIRE(v.state == kv_poll::transferring);
  bool on_prefill = at < 2;
  auto& victim = on_prefill ? prefill[at] : decode[at - 2];
  auto handle = on_prefill ? caf::actor_cast<caf::actor>(victim.rt->prefill())
                           : caf::actor_cast<caf::actor>(victim.rt->decode());
  freeze(handle);
  finish_sending(h);  // the survivors finish their part; the room waits for the frozen one
  run_live();
  // A silence passes without an answer first (counted from the last ping it
  // answered, sent at most one round before it froze): nothing is decided
  // before.
  pass(limits.silence() - limits.heartbeat);
  for (size_t k = 0; k < 4; ++k)
    if (k != at)
      CHECK(views(h)[k].state != kv_poll::failed);
  pass(3 * limits.heartbeat);
  auto v = views(h);
  std::optional<failure> first;
  for (size_t k = 0; k < 4; ++k) {
    if (k == at)
      continue;
    CAPTURE(k);
    REQUIRE(v[k].state == kv_poll::failed);
    if (!first)
      first = v[k].error->why;
    CHECK(v[k].error->why == *first);
  }
  CHECK(first->code == errc::heartbeat_lost);
  CHECK(first->origin.side == victim.rt->rank().side);
  CHECK(first->origin.tp == victim.rt->rank().tp);
  CHECK_THAT(first->cause, Catch::Contains("answered none of 5 heartbeats in a row (1s)"));

  // It wakes up: its backlog carries the verdict; it concludes the same.
  thaw(handle);
  sched.run();
  v = views(h);
  REQUIRE(v[at].state == kv_poll::failed);
  CHECK(v[at].error->why == *first);

  // Alive again: the next room succeeds on every rank.
  auto next = open_room(41, {9, 10}, {11, 12}, 2, 2, 1);
  sched.run();
  for (auto& w : views(next))
    CHECK(w.state == kv_poll::success);
}

TEST_CASE_METHOD(heartbeat_fixture,
                 "a frozen decider is declared lost by every rank - in one voice",
                 "[actors][heartbeat]") {
  start(2, 1, 2, 1);
  auto h = half_sent(50);
  freeze(dec);
  finish_sending(h);
  run_live();
  // Every rank finished its part and waits for the verdict.
  pass(limits.decider_silence() - limits.heartbeat);
  for (auto& w : views(h))
    CHECK(w.state == kv_poll::transferring);
  pass(3 * limits.heartbeat);
  auto v = views(h);
  for (auto& w : v) {
    REQUIRE(w.state == kv_poll::failed);
    CHECK(w.error->why == v[0].error->why);
  }
  CHECK(v[0].error->why.code == errc::peer_down);
  CHECK_THAT(v[0].error->why.cause,
             Catch::Matches("contact was lost between the decider of decode-0 "
                            "and a rank of the room"));

  // It wakes up with every finish in its mailbox: past its lease, its verdict
  // is the cause the ranks concluded with, not Success.
  thaw(dec);
  sched.run();
  for (auto& w : views(h))
    CHECK(w.error->why == v[0].error->why);
  auto next = open_room(51, {9, 10}, {11, 12}, 2, 2, 1);
  sched.run();
  for (auto& w : views(next))
    CHECK(w.state == kv_poll::success);
}

TEST_CASE_METHOD(heartbeat_fixture,
                 "a decider that wakes up before any rank gave up still decides Success",
                 "[actors][heartbeat]") {
  start(2, 1, 2, 1);
  auto h = half_sent(60);
  freeze(dec);
  finish_sending(h);
  run_live();
  pass(limits.silence());  // well within the lease
  thaw(dec);
  sched.run();
  for (auto& w : views(h))
    CHECK(w.state == kv_poll::success);
}

// Every undecided room names its prefill ranks; a rank is pinged, and missed,
// once a round however many rooms name it: a silent rank is lost after the
// silence, not a silence divided by the rooms in flight.
TEST_CASE_METHOD(heartbeat_fixture,
                 "a silent rank named by many rooms is lost after the silence, not sooner",
                 "[actors][heartbeat]") {
  start(1, 1, 1, 1);
  std::vector<room_handles> rooms;
  for (uint64_t id = 50; id < 58; ++id)
    rooms.push_back(half_sent(id));
  auto victim = prefill[0].rt->prefill();
  freeze(victim);
  run_live();
  pass(limits.silence() - 2 * limits.heartbeat);
  for (auto& h : rooms)
    CHECK(h.receivers[0].poll() == kv_poll::transferring);
  pass(3 * limits.heartbeat);
  for (auto& h : rooms) {
    REQUIRE(h.receivers[0].poll() == kv_poll::failed);
    CHECK(h.receivers[0].failure()->why.code == errc::heartbeat_lost);
  }
  thaw(victim);
  sched.run();
}

TEST_CASE_METHOD(heartbeat_fixture, "idle: the decider pings its members - the ranks watch nothing",
                 "[actors][heartbeat]") {
  start(2, 1, 2, 1);
  auto h = open_room(70, {1, 2}, {3, 4}, 1, 1, 1);
  sched.run();
  for (auto& w : views(h))
    REQUIRE(w.state == kv_poll::success);
  // Idle for a long while: the members answer every ping, no rank arms a
  // check of its own, and no one is blamed for the quiet.
  pass(30s);
  auto& d = state_of<decider_state>(dec);
  CHECK(d.pings >= static_cast<uint64_t>(2 * (30s / limits.heartbeat) - 2));
  for (auto& r : decode) {
    CHECK_FALSE(d.beats.lost(r.rt->rank()));
    CHECK_FALSE(state_of<decode_rank_state>(r.rt->decode()).tick_armed);
  }
  for (auto& r : prefill)
    CHECK_FALSE(state_of<prefill_rank_state>(r.rt->prefill()).tick_armed);
  auto next = open_room(71, {5, 6}, {7, 8}, 2, 2, 1);
  sched.run();
  for (auto& w : views(next))
    CHECK(w.state == kv_poll::success);
}
