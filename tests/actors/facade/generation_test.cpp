// Generations keep what is stale from touching what is current: a message of
// an older room generation, for a room id opened again, is refused on both
// sides; a message from a replaced prefill instance generation is refused by
// decode. In each case the room of the current generation moves every byte.
#include "tests/support/instance_fixture.hpp"

#include "messages/decision.hpp"
#include "messages/transfer.hpp"

using namespace kvferry;
using namespace kvferry::test;

namespace {

struct generation_fixture : instance_fixture {
  /// Opens room `id` on the one rank of each side and sends its first page:
  /// the room stays live until `finish()`.
  room_handles open_live(uint64_t id, bootstrap_locator at) {
    room_handles h;
    h.receivers.push_back(decode[0].rt->make_receiver(id, at));
    h.receivers.back().init({4, 5}, 1);
    prefill[0].pool->fill_room(seed, id, {0, 1}, 1);
    h.senders.push_back(prefill[0].rt->make_sender(id));
    h.senders.back().init(2, 1);
    h.senders.back().send({0}, false);
    return h;
  }

  /// Sends the rest of a room opened by open_live(); both sides succeed.
  void finish(room_handles& h, uint64_t id) {
    h.senders[0].send({1}, true);
    sched.run();
    CHECK(h.senders[0].poll() == kv_poll::success);
    CHECK(h.receivers[0].poll() == kv_poll::success);
    CHECK(decode[0].pool->holds_room(seed, id, {4, 5}, 1));
  }

  room_key decode_key(uint64_t id) {
    return state_of<decode_rank_state>(decode[0].rt->decode()).rooms.at(id).key();
  }

  rank_ref prefill_self() {
    return state_of<prefill_rank_state>(prefill[0].rt->prefill()).cfg.self;
  }

  rank_ref decode_self() { return state_of<decode_rank_state>(decode[0].rt->decode()).cfg.self; }
};

}  // namespace

TEST_CASE_METHOD(generation_fixture,
                 "a message of an older room generation for a re-opened room id is refused on "
                 "both sides - the current room succeeds",
                 "[actors][generation]") {
  start(1, 1, 1, 1);
  auto d = decode[0].rt->decode();
  auto p = prefill[0].rt->prefill();
  auto first = open_room(30, {0, 1}, {4, 5}, 1, 1, 1);
  sched.run();
  REQUIRE(first.receivers[0].poll() == kv_poll::success);
  auto old_key = decode_key(30);
  first.receivers[0].clear();
  first.senders[0].clear();
  sched.run();

  // Opened again: the decider draws a new generation for the id.
  auto h = open_live(30, where());
  sched.run();
  REQUIRE(h.receivers[0].poll() == kv_poll::transferring);
  auto key = decode_key(30);
  REQUIRE(key.room == old_key.room);
  REQUIRE(key.generation != old_key.generation);
  REQUIRE(state_of<prefill_rank_state>(p).rooms.at(30).key() == key);
  auto src = prefill_self();
  auto dst = decode_self();
  failure stale_why{errc::aborted, "a verdict of the older generation", dst};

  // Decode: a chunk report and a verdict of the older generation.
  self->send(d, chunk_landed{old_key, src, 1, 1, 0, true, false, 1});
  self->send(d, room_verdict{old_key, kv_poll::failed, stale_why});
  // Prefill: a request (naming this test as its decider), a chunk result and
  // a verdict of the older generation.
  auto stale_decider = caf::actor_cast<decider_actor>(caf::actor{self});
  self->send(p, room_request{old_key, dst, stale_decider, {4, 5}, 1, {}, false});
  chunk_result late;
  late.key = old_key;
  late.peer = dst;
  late.chunk = 1;
  late.last = true;
  late.pages = 1;
  late.why = stale_why;
  self->send(p, late);
  self->send(p, room_verdict{old_key, kv_poll::failed, stale_why});
  sched.run();

  // The stale request is refused to the decider it names, naming both keys;
  // nothing else reaches this test.
  std::optional<room_failure> told;
  self->receive([&](room_failure& f) { told = f; }, caf::after(std::chrono::seconds{0}) >> [] {});
  REQUIRE(told);
  CHECK(told->key == old_key);
  CHECK(told->why.code == errc::duplicate_room);
  CHECK(told->why.cause == to_string(old_key) + " requested while " + to_string(key) +
                               " is live on prefill-0 tp0 pp0");
  // The current room did not move: still live on both sides, then done.
  CHECK(h.senders[0].poll() == kv_poll::transferring);
  CHECK(h.receivers[0].poll() == kv_poll::transferring);
  finish(h, 30);
}

TEST_CASE_METHOD(generation_fixture,
                 "decode refuses a chunk report from a replaced prefill instance generation - the "
                 "room of the current one succeeds",
                 "[actors][generation]") {
  start(1, 1, 1, 1);  // prefill generation 3
  auto before = open_room(40, {0, 1}, {4, 5}, 1, 1, 1);
  sched.run();
  REQUIRE(before.receivers[0].poll() == kv_poll::success);
  auto old_rank = prefill_self();
  REQUIRE(old_rank.instance_generation == 3u);
  kill_prefill();
  sched.run();
  restart_prefill(1, 1, 9);

  auto h = open_live(41, where());
  sched.run();
  REQUIRE(h.receivers[0].poll() == kv_poll::transferring);
  // A last-chunk report for the live room, from the replaced incarnation of
  // its source: taken, it would fail the room (not a source of it) or count.
  auto d = decode[0].rt->decode();
  self->send(d, chunk_landed{decode_key(41), old_rank, 1, 1, 0, true, false, 1});
  sched.run();
  CHECK(h.receivers[0].poll() == kv_poll::transferring);
  CHECK(h.senders[0].poll() == kv_poll::transferring);
  finish(h, 41);
}

TEST_CASE_METHOD(generation_fixture,
                 "decode refuses the topology of a replaced prefill instance generation - naming "
                 "both generations",
                 "[actors][generation]") {
  limits.bootstrapping = std::chrono::seconds{2};
  start(1, 1, 1, 1);  // prefill generation 3
  auto old_rank = prefill_self();
  auto layout = state_of<prefill_rank_state>(prefill[0].rt->prefill()).cfg.layout;
  // The instance restarts as generation 9, and decode hears of it.
  kill_prefill();
  sched.run();
  restart_prefill(1, 1, 9);
  auto current = open_room(50, {0, 1}, {4, 5}, 1, 1, 1);
  sched.run();
  REQUIRE(current.receivers[0].poll() == kv_poll::success);

  // A bootstrap of generation 3 still answers (a stale address): it knows
  // a complete instance, but decode refuses what it says.
  auto stale_boot = sys.spawn(bootstrap, std::string{"prefill-0"}, uint64_t{3});
  auto reg = self->request(
      stale_boot, caf::infinite,
      rank_registration{
          old_rank, prefill[0].rt->prefill(), "inproc://old", layout, 1, 1, {}, 0, {}});
  sched.run();
  reg.receive([](registration_ack&) {},
              [&](caf::error& err) { FAIL("registration refused: " << sys.render(err)); });
  auto r = decode[0].rt->make_receiver(51, bootstrap_locator{stale_boot, "", 0});
  r.init({6, 7}, 2);
  sched.run();
  CHECK(r.poll() == kv_poll::bootstrapping);
  pass(limits.bootstrapping + limits.verdict + std::chrono::seconds{1});
  REQUIRE(r.poll() == kv_poll::failed);
  auto why = r.failure()->why;
  CHECK(why.code == errc::bootstrap_unreachable);
  CHECK_THAT(why.cause, Catch::Contains("instance prefill-0 is of generation 3 of prefill-0, "
                                        "which generation 9 replaced"));
  // The current generation serves on.
  auto h = open_live(52, where());
  sched.run();
  finish(h, 52);
  caf::anon_send_exit(stale_boot, caf::exit_reason::kill);
}

TEST_CASE_METHOD(generation_fixture,
                 "a verdict of an older room generation does not conclude a re-opened room "
                 "before the decider keys it",
                 "[actors][generation]") {
  start(1, 1, 1, 1);
  auto first = open_room(32, {0, 1}, {4, 5}, 1, 1, 1);
  sched.run();
  REQUIRE(first.receivers[0].poll() == kv_poll::success);
  auto old_key = decode_key(32);
  first.receivers[0].clear();
  first.senders[0].clear();
  sched.run();
  // The old room's verdict, sent again, reaches decode right after the id
  // opens there again, before the decider keyed the new room.
  auto h = open_live(32, where());
  self->send(
      decode[0].rt->decode(),
      room_verdict{old_key, kv_poll::failed,
                   failure{errc::aborted, "a verdict of the older generation", decode_self()}});
  sched.run();
  CHECK(decode_key(32).generation != old_key.generation);
  CHECK(h.receivers[0].poll() == kv_poll::transferring);
  finish(h, 32);
}

TEST_CASE_METHOD(generation_fixture,
                 "a request or verdict of an older room generation does not bind or conclude a "
                 "re-opened prefill room before its new request",
                 "[actors][generation]") {
  start(1, 1, 1, 1);
  auto first = open_room(34, {0, 1}, {4, 5}, 1, 1, 1);
  sched.run();
  REQUIRE(first.senders[0].poll() == kv_poll::success);
  auto old_key = decode_key(34);
  first.receivers[0].clear();
  first.senders[0].clear();
  sched.run();
  // The prefill scheduler opens the id again first; the old room's request
  // and verdict, sent again, reach it before decode opens the id.
  auto p = prefill[0].rt->prefill();
  prefill[0].pool->fill_room(seed, 34, {0, 1}, 1);
  auto s = prefill[0].rt->make_sender(34);
  s.init(2, 1);
  s.send({0}, false);
  auto stale_decider = caf::actor_cast<decider_actor>(caf::actor{self});
  self->send(p, room_request{old_key, decode_self(), stale_decider, {4, 5}, 1, {}, false});
  self->send(
      p, room_verdict{old_key, kv_poll::failed,
                      failure{errc::aborted, "a verdict of the older generation", decode_self()}});
  sched.run();
  CHECK(s.poll() == kv_poll::bootstrapping);
  CHECK(state_of<prefill_rank_state>(p).rooms.at(34).key().generation == 0u);
  // The old room succeeded: nothing to tell the decider the request names.
  std::optional<room_failure> told;
  self->receive([&](room_failure& f) { told = f; }, caf::after(std::chrono::seconds{0}) >> [] {});
  CHECK_FALSE(told);
  room_handles h;
  h.senders.push_back(std::move(s));
  h.receivers.push_back(decode[0].rt->make_receiver(34, where()));
  h.receivers.back().init({4, 5}, 1);
  sched.run();
  CHECK(decode_key(34).generation != old_key.generation);
  finish(h, 34);
}
