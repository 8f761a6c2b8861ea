// judge_request, branch by branch: what a prefill rank does with a decode
// rank's request for a room its scheduler opened (issue 33, step 1).
#include <catch2/catch.hpp>

#include "actors/rank/request_outcome.hpp"

using namespace kvferry;
using action = request_outcome::action;

namespace {

const rank_ref prefill_self{role::prefill, "p", 1, 0, 0};
const rank_ref asker{role::decode, "d", 2, 0, 0};

room_request request_of(uint64_t generation) {
  return room_request{room_key{5, generation}, asker, {}, {1, 2}, 0, {}, false};
}

/// An open, unbound, live room, its peer registered, its instance whole.
request_facts unbound_room() {
  request_facts f;
  f.room = room_key{5, 0};
  f.state = kv_poll::bootstrapping;
  f.peer_registered = true;
  f.self = prefill_self;
  return f;
}

}  // namespace

TEST_CASE("judge_request: a request of a cleared room repeats its failure, ignores its success",
          "[logic][rank]") {
  auto f = unbound_room();
  room_verdict failed{room_key{5, 7}, kv_poll::failed,
                      failure{errc::aborted, "gone", prefill_self}};
  f.cleared = &failed;
  CHECK(judge_request(f, request_of(7)) == request_outcome{action::tell_decider, failed.why});
  room_verdict fine{room_key{5, 7}, kv_poll::success, {}};
  f.cleared = &fine;
  CHECK(judge_request(f, request_of(7)).what == action::ignore);
}

TEST_CASE("judge_request: a room concluded here answers with its cause or not at all",
          "[logic][rank]") {
  auto f = unbound_room();
  f.state = kv_poll::failed;
  f.concluded_why = failure{errc::deadline, "room 5 stayed in Bootstrapping", prefill_self};
  CHECK(judge_request(f, request_of(9)) == request_outcome{action::tell_decider, f.concluded_why});
  f.state = kv_poll::success;
  f.room.generation = 9;
  CHECK(judge_request(f, request_of(9)).what == action::ignore);
}

TEST_CASE("judge_request: another incarnation of the id refuses only the newcomer",
          "[logic][rank]") {
  auto f = unbound_room();
  f.room.generation = 8;
  auto out = judge_request(f, request_of(9));
  CHECK(out.what == action::tell_decider);
  CHECK(out.why.code == errc::duplicate_room);
  CHECK(out.why.cause == "room 5#9 requested while room 5#8 is live on p tp0 pp0");
  CHECK(out.why.origin == prefill_self);
  CHECK(judge_request(f, request_of(8)).what == action::bind);  // its own generation binds
}

TEST_CASE("judge_request: a dead instance or an unregistered peer fails the room here",
          "[logic][rank]") {
  auto f = unbound_room();
  f.instance_down = failure{errc::instance_dead, "p tp1 pp0 left", prefill_self};
  CHECK(judge_request(f, request_of(9)) == request_outcome{action::report, *f.instance_down});
  f.instance_down.reset();
  f.peer_registered = false;
  auto out = judge_request(f, request_of(9));
  CHECK(out.what == action::report);
  CHECK(out.why.code == errc::invalid_argument);
  CHECK(out.why.cause ==
        "request for room 5#9 from d tp0 pp0, which has not registered its layout with this rank");
  f.peer_registered = true;
  CHECK(judge_request(f, request_of(9)) == request_outcome{action::bind, {}});
}
