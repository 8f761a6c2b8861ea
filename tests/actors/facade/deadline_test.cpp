// Every non-terminal state has a deadline, on both sides; a room that passes
// one fails with a cause naming the state, and both sides conclude the same.
// Time is the coordinator's: nothing here sleeps.
#include "tests/support/pair_fixture.hpp"

using namespace kvferry;
using namespace kvferry::test;
using namespace std::chrono_literals;

namespace {

struct deadline_fixture : pair_fixture {
  /// Advances virtual time in steps, delivering what each step fires.
  void pass(std::chrono::nanoseconds d, std::chrono::nanoseconds step = 1s) {
    for (auto t = std::chrono::nanoseconds{0}; t < d; t += step) {
      sched.advance_time(std::min(step, d - t));
      sched.run();
    }
  }

  std::vector<uint32_t> src{1, 2, 3, 4};
  std::vector<uint32_t> dst{9, 8, 7, 6};
};

deadlines with(std::chrono::seconds boot, std::chrono::seconds wait, std::chrono::seconds xfer) {
  deadlines d;
  d.bootstrapping = boot;
  d.waiting_for_input = wait;
  d.transferring = xfer;
  d.verdict = 5s;
  return d;
}

}  // namespace

TEST_CASE_METHOD(deadline_fixture, "prefill Bootstrapping: no decode ever asks",
                 "[actors][deadline]") {
  start();
  auto s = prefill.rt->make_sender(1);
  sched.run();
  pass(59s);
  CHECK(s.poll() == kv_poll::bootstrapping);
  pass(1s);
  REQUIRE(s.poll() == kv_poll::failed);
  auto e = s.failure();
  REQUIRE(e);
  CHECK(e->why.code == errc::deadline);
  // No decode rank asked: every prefill rank concludes alone, in the same words.
  CHECK(e->why.cause ==
        "room 1 stayed in Bootstrapping past its 1min deadline: no decode rank "
        "asked for it");
  CHECK(e->why.origin == instance_ref(role::prefill, "prefill-0", 7));
  // A decode that asks later gets the same verdict.
  auto r = decode.rt->make_receiver(1, where());
  r.init(dst, 0);
  sched.run();
  REQUIRE(r.poll() == kv_poll::failed);
  CHECK(r.failure()->why == e->why);
}

TEST_CASE_METHOD(deadline_fixture, "prefill WaitingForInput: the scheduler never sends",
                 "[actors][deadline]") {
  prefill_limits = with(60s, 100s, 60s);
  decode_limits = with(60s, 300s, 60s);
  start();
  auto r = decode.rt->make_receiver(2, where());
  r.init(dst, 0);
  auto s = prefill.rt->make_sender(2);
  sched.run();
  REQUIRE(s.poll() == kv_poll::waiting_for_input);
  pass(99s);
  CHECK(s.poll() == kv_poll::waiting_for_input);
  pass(1s);
  REQUIRE(s.poll() == kv_poll::failed);
  REQUIRE(r.poll() == kv_poll::failed);
  CHECK(s.failure()->why == r.failure()->why);
  CHECK(r.failure()->why.cause == "room 2#" + std::to_string(r.failure()->room.generation) +
                                      " stayed in WaitingForInput past its 100s deadline");
  CHECK(r.failure()->why.origin.side == role::prefill);
}

TEST_CASE_METHOD(deadline_fixture,
                 "decode WaitingForInput: the prefill scheduler never opens the room",
                 "[actors][deadline]") {
  decode_limits = with(60s, 10s, 60s);
  start();
  auto r = decode.rt->make_receiver(3, where());
  r.init(dst, 0);
  sched.run();
  REQUIRE(r.poll() == kv_poll::waiting_for_input);
  pass(10s);
  REQUIRE(r.poll() == kv_poll::failed);
  auto why = r.failure()->why;
  CHECK(why.code == errc::deadline);
  CHECK_THAT(why.cause, Catch::Contains("stayed in WaitingForInput past its 10s deadline"));
  CHECK(why.origin.side == role::decode);
  // The prefill scheduler opens it late: it concludes at once, with the same cause.
  auto s = prefill.rt->make_sender(3);
  sched.run();
  REQUIRE(s.poll() == kv_poll::failed);
  CHECK(s.failure()->why == why);
}

TEST_CASE_METHOD(deadline_fixture, "Transferring: the last chunk never comes",
                 "[actors][deadline]") {
  auto decode_first = GENERATE(true, false);
  CAPTURE(decode_first);
  prefill_limits = with(60s, 300s, decode_first ? 40s : 20s);
  decode_limits = with(60s, 300s, decode_first ? 20s : 40s);
  start();
  auto r = decode.rt->make_receiver(4, where());
  r.init(dst, 0);
  auto s = prefill.rt->make_sender(4);
  s.init(4, 0);
  s.send({1, 2}, false);
  sched.run();
  REQUIRE(s.poll() == kv_poll::transferring);
  REQUIRE(r.poll() == kv_poll::transferring);
  pass(19s);
  CHECK(r.poll() == kv_poll::transferring);
  pass(1s);
  REQUIRE(r.poll() == kv_poll::failed);
  REQUIRE(s.poll() == kv_poll::failed);
  CHECK(s.failure()->why == r.failure()->why);
  CHECK_THAT(r.failure()->why.cause,
             Catch::Contains("stayed in Transferring past its 20s deadline"));
  CHECK(r.failure()->why.origin.side == (decode_first ? role::decode : role::prefill));
}

TEST_CASE_METHOD(deadline_fixture, "progress re-arms the Transferring deadline",
                 "[actors][deadline]") {
  prefill_limits = decode_limits = with(60s, 300s, 20s);
  start();
  auto r = decode.rt->make_receiver(5, where());
  r.init(dst, 0);
  auto s = prefill.rt->make_sender(5);
  s.init(4, 0);
  s.send({1}, false);
  sched.run();
  pass(15s);
  s.send({2}, false);
  sched.run();
  pass(15s);
  s.send({3, 4}, true);
  sched.run();
  CHECK(r.poll() == kv_poll::success);
  CHECK(s.poll() == kv_poll::success);
}

TEST_CASE_METHOD(deadline_fixture, "decode Bootstrapping: the prefill instance never completes",
                 "[actors][deadline]") {
  start();
  // A second instance whose only rank never registers.
  auto empty = sys.spawn(bootstrap, std::string{"prefill-empty"}, uint64_t{3});
  auto r = decode.rt->make_receiver(6, bootstrap_locator{empty, "", 0});
  r.init(dst, 0);
  sched.run();
  pass(59s, 250ms);
  CHECK(r.poll() == kv_poll::bootstrapping);
  pass(1s, 250ms);
  REQUIRE(r.poll() == kv_poll::failed);
  auto why = r.failure()->why;
  CHECK(why.code == errc::bootstrap_unreachable);
  CHECK_THAT(why.cause,
             Catch::Contains("stayed in Bootstrapping past its 1min deadline") &&
                 Catch::Contains("prefill instance prefill-empty has 0 of 0 ranks registered"));
  caf::anon_send_exit(empty, caf::exit_reason::kill);
}

namespace {

/// A decider that never answers: no verdict, no key, no ping. It counts the
/// failures reported to it.
decider_actor::behavior_type silent_decider(std::shared_ptr<int> reports) {
  return {
      [](member_registration&) -> member_ack { return {}; },
      [](room_join&) {},
      [](room_finished&) {},
      [reports](room_failure&) { ++*reports; },
      [](room_leave&) {},
      [](reach_peers& r) { return r; },
      [](heartbeat_tick_atom) {},
      [](expire_atom) {},
      [](life_ended&) {},
  };
}

}  // namespace

TEST_CASE_METHOD(deadline_fixture,
                 "a rank whose decider never decides reminds it twice - then concludes alone",
                 "[actors][deadline]") {
  // Heartbeats out of the way: this is the verdict deadline of a decider that
  // is alive (not silent for long) but never decides.
  limits.heartbeat = 1h;
  start();
  auto reports = std::make_shared<int>(0);
  auto silent = sys.spawn(silent_decider, reports);
  auto s = prefill.rt->make_sender(7);
  sched.run();
  // A request from a rank that never registered: refused, reported to the decider.
  caf::anon_send(
      prefill.rt->prefill(),
      room_request{
          room_key{7, 1}, rank_ref{role::decode, "ghost", 1, 0, 0}, silent, dst, 0, {}, false});
  sched.run();
  CHECK(s.poll() == kv_poll::bootstrapping);
  CHECK(*reports == 1);
  pass(5s);  // the verdict deadline: the decider is reminded
  CHECK(s.poll() == kv_poll::bootstrapping);
  CHECK(*reports == 2);
  pass(5s);
  CHECK(s.poll() == kv_poll::bootstrapping);
  CHECK(*reports == 3);
  pass(5s);
  REQUIRE(s.poll() == kv_poll::failed);
  CHECK(*reports == 3);
  CHECK(s.failure()->why.code == errc::invalid_argument);
  CHECK_THAT(s.failure()->why.cause, Catch::Contains("ghost tp0 pp0, which has not registered"));
  caf::anon_send_exit(silent, caf::exit_reason::kill);
}

TEST_CASE_METHOD(deadline_fixture, "a rank that goes down fails the rooms that involve it",
                 "[actors][deadline]") {
  start();
  auto r = decode.rt->make_receiver(8, where());
  r.init(dst, 0);
  auto s = prefill.rt->make_sender(8);
  sched.run();
  REQUIRE(s.poll() == kv_poll::waiting_for_input);
  SECTION("decode dies") {
    caf::anon_send_exit(decode.rt->decode(), caf::exit_reason::kill);
    sched.run();
    REQUIRE(s.poll() == kv_poll::failed);
    CHECK(s.failure()->why.code == errc::peer_down);
    CHECK_THAT(s.failure()->why.cause, Catch::Contains("decode decode-0 tp0 pp0 went down"));
    // The dead rank's own room does not hang in its scheduler's polls.
    REQUIRE(r.poll() == kv_poll::failed);
    CHECK(r.failure()->why.code == errc::shut_down);
    CHECK(r.failure()->why.cause ==
          "the rank actor of decode-0 tp0 pp0 terminated before room 8 concluded (it was "
          "WaitingForInput)");
  }
  SECTION("prefill dies") {
    caf::anon_send_exit(prefill.rt->prefill(), caf::exit_reason::kill);
    sched.run();
    REQUIRE(r.poll() == kv_poll::failed);
    CHECK(r.failure()->why.code == errc::peer_down);
    CHECK_THAT(r.failure()->why.cause, Catch::Contains("prefill prefill-0 tp0 pp0 went down"));
    REQUIRE(s.poll() == kv_poll::failed);
    CHECK(s.failure()->why.code == errc::shut_down);
  }
}

TEST_CASE_METHOD(deadline_fixture,
                 "a rank whose decider sends no heartbeat concludes the decider lost",
                 "[actors][deadline][heartbeat]") {
  start();
  auto silent = sys.spawn(silent_decider, std::make_shared<int>(0));
  auto s = prefill.rt->make_sender(9);
  sched.run();
  // A request from a registered-looking decode rank of instance "mute": the
  // room waits for its pages, and for verdicts from a decider that is mute.
  caf::anon_send(
      prefill.rt->prefill(),
      room_request{
          room_key{9, 1}, rank_ref{role::decode, "mute", 2, 0, 0}, silent, dst, 0, {}, false});
  sched.run();
  auto limit = limits.decider_silence();  // 2 x 5 x 200 ms + 2 x 200 ms
  pass(limit - limits.heartbeat, 100ms);
  CHECK(s.poll() == kv_poll::bootstrapping);
  pass(2 * limits.heartbeat, 100ms);
  REQUIRE(s.poll() == kv_poll::failed);
  CHECK(s.failure()->why.code == errc::peer_down);
  CHECK(s.failure()->why.cause ==
        "contact was lost between the decider of mute and a rank of the room");
  caf::anon_send_exit(silent, caf::exit_reason::kill);
}
