// No write after release: a room's decode pages are released to the
// scheduler only once nothing more can land in them (its fence is closed and
// quiet), and a write that comes later, from a prefill rank that has not yet
// heard the verdict, is refused by the data plane instead of landing.
#include "tests/support/pair_fixture.hpp"

using namespace kvferry;
using namespace kvferry::test;

namespace {

struct release_fixture : pair_fixture {
  /// Runs every message waiting at `who`.
  template <class Handle>
  void drain(const Handle& who) {
    while (sched.prioritize(who))
      sched.run_once();
  }
};

}  // namespace

TEST_CASE_METHOD(release_fixture, "a room that succeeds releases its pages on both sides",
                 "[actors][release]") {
  start();
  fill(*prefill.pool, 3, {1, 2}, 0);
  auto s = prefill.rt->make_sender(3);
  auto r = decode.rt->make_receiver(3, where());
  r.init({4, 5}, 1);
  s.init(2, 0);
  s.send({1, 2}, true);
  sched.run();
  REQUIRE(r.poll() == kv_poll::success);
  CHECK(r.released());
  CHECK(s.released());
}

TEST_CASE_METHOD(release_fixture, "a write that comes after the release is refused - not landed",
                 "[actors][release]") {
  start();
  auto p = prefill.rt->prefill();
  auto d = decode.rt->decode();
  auto t = prefill.rt->transfer();
  auto dec = decode.rt->decider();
  fill(*prefill.pool, 4, {1, 2, 3}, 0);
  auto s = prefill.rt->make_sender(4);
  auto r = decode.rt->make_receiver(4, where());
  r.init({10, 11, 12}, 1);
  s.init(3, 0);
  sched.run();
  REQUIRE(s.poll() == kv_poll::waiting_for_input);
  CHECK_FALSE(r.released());
  // The prefill scheduler sends its chunk; decode aborts. Decode and the
  // decider go first: the room is Failed and its pages released on decode
  // while the prefill rank has not yet seen the verdict.
  s.send({1, 2, 3}, true);
  r.abort();
  drain(d);
  drain(dec);
  drain(d);
  REQUIRE(r.poll() == kv_poll::failed);
  REQUIRE(r.released());
  CHECK(s.poll() == kv_poll::waiting_for_input);
  // Now the prefill rank catches up: its chunk goes out before the verdict.
  drain(p);
  drain(t);
  drain(t);
  sched.run();
  CHECK(s.poll() == kv_poll::failed);
  CHECK(s.failure()->why == r.failure()->why);
  CHECK(s.released());
  for (uint32_t page : {10u, 11u, 12u})
    CHECK(untouched(*decode.pool, page));
}

TEST_CASE_METHOD(release_fixture, "a room cleared before its verdict closes its fence at once",
                 "[actors][release]") {
  start();
  fill(*prefill.pool, 5, {1}, 0);
  auto s = prefill.rt->make_sender(5);
  {
    auto r = decode.rt->make_receiver(5, where());
    r.init({20}, 2);
    s.init(1, 0);
    sched.run();
  }  // the decode scheduler drops the room
  s.send({1}, true);
  sched.run();
  CHECK(s.poll() == kv_poll::failed);
  CHECK(untouched(*decode.pool, 20));
}
