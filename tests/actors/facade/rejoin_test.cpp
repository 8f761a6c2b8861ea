// Generations and rejoin: an instance that is killed and restarted under the
// same name comes back with a newer generation. The rooms of the dead
// incarnation conclude Failed on every surviving rank with one cause; the
// other instance keeps running and the new incarnation serves new rooms; what
// still arrives from an older generation is refused.
#include "tests/support/instance_fixture.hpp"

using namespace kvferry;
using namespace kvferry::test;

TEST_CASE_METHOD(instance_fixture,
                 "a prefill instance killed mid-room and restarted: decode fails the old room "
                 "with one cause and moves new rooms through the new incarnation",
                 "[actors][rejoin]") {
  start(2, 1, 2, 1);
  room_handles old;
  for (auto& r : decode) {
    old.receivers.push_back(r.rt->make_receiver(2, where()));
    old.receivers.back().init({5, 6, 7, 8}, 2);
  }
  for (auto& r : prefill) {
    r.pool->fill_room(seed, 2, {1, 2, 3, 4}, 2);
    old.senders.push_back(r.rt->make_sender(2));
    old.senders.back().init(4, 2);
    old.senders.back().send({1, 2}, false);
  }
  sched.run();
  REQUIRE(old.receivers[0].poll() == kv_poll::transferring);

  kill_prefill();
  sched.run();
  auto why = one_failure(old.receivers);
  CHECK(why.code == errc::peer_down);
  CHECK(why.cause.find("prefill prefill-0 tp") == 0);
  // The dead incarnation's own slots read Failed too (their actor is gone).
  for (auto& s : old.senders)
    CHECK(s.poll() == kv_poll::failed);
  pass(limits.decider_silence());
  for (auto& r : old.receivers)
    CHECK(r.released());

  restart_prefill(2, 1, 9);
  for (auto& r : prefill)
    CHECK(state_of<prefill_rank_state>(r.rt->prefill()).cfg.self.instance_generation == 9u);
  auto next = open_room(3, {1, 2, 3}, {9, 10, 11}, 1, 3, 2);
  sched.run();
  for (auto& s : next.senders)
    CHECK(s.poll() == kv_poll::success);
  for (size_t k = 0; k < decode.size(); ++k) {
    CHECK(next.receivers[k].poll() == kv_poll::success);
    CHECK(decode[k].pool->holds_room(seed, 3, {9, 10, 11}, 3));
  }
}

TEST_CASE_METHOD(instance_fixture,
                 "a decode instance killed mid-room and restarted: prefill fails the old room "
                 "with one cause and serves the new incarnation",
                 "[actors][rejoin]") {
  start(2, 1, 2, 1);
  room_handles old;
  for (auto& r : decode) {
    old.receivers.push_back(r.rt->make_receiver(4, where()));
    old.receivers.back().init({5, 6, 7, 8}, 2);
  }
  for (auto& r : prefill) {
    r.pool->fill_room(seed, 4, {1, 2, 3, 4}, 2);
    old.senders.push_back(r.rt->make_sender(4));
    old.senders.back().init(4, 2);
    old.senders.back().send({1, 2}, false);
  }
  sched.run();
  REQUIRE(old.senders[0].poll() == kv_poll::transferring);

  kill_decode();
  sched.run();
  auto why = one_failure(old.senders);
  CHECK(why.code == errc::peer_down);
  CHECK(why.cause.find("decode-0") != std::string::npos);
  for (auto& r : old.receivers)
    CHECK(r.poll() == kv_poll::failed);

  restart_decode(2, 1, 12);
  for (auto& r : decode)
    CHECK(state_of<decode_rank_state>(r.rt->decode()).cfg.self.instance_generation == 12u);
  // The prefill ranks still serve: a new room moves every byte.
  auto next = open_room(5, {1, 2}, {3, 4}, 1, 1, 1);
  sched.run();
  for (auto& s : next.senders)
    CHECK(s.poll() == kv_poll::success);
  for (size_t k = 0; k < decode.size(); ++k) {
    CHECK(next.receivers[k].poll() == kv_poll::success);
    CHECK(decode[k].pool->holds_room(seed, 5, {3, 4}, 1));
  }
  for (auto& s : old.senders)
    CHECK(s.released());
}

TEST_CASE_METHOD(instance_fixture,
                 "a message from a replaced generation is refused and costs nothing else",
                 "[actors][rejoin]") {
  start(1, 1, 1, 1);
  auto first = open_room(6, {1, 2}, {3, 4}, 1, 1, 1);
  sched.run();
  REQUIRE(first.receivers[0].poll() == kv_poll::success);
  kill_decode();
  sched.run();
  restart_decode(1, 1, 12);
  auto next = open_room(7, {5, 6}, {7, 8}, 2, 2, 1);
  sched.run();
  REQUIRE(next.receivers[0].poll() == kv_poll::success);

  auto p = prefill[0].rt->prefill();
  auto old_rank = rank_ref{role::decode, "decode-0", 4, 0, 0};
  // A registration of the replaced generation: refused, naming both.
  auto rh = self->request(
      p, caf::infinite,
      dest_registration{old_rank,
                        decode[0].rt->decode(),
                        "inproc://gone",
                        state_of<decode_rank_state>(decode[0].rt->decode()).cfg.pool.layout,
                        {},
                        {}});
  sched.run();
  std::optional<caf::error> refused;
  rh.receive([](dest_accepted&) { FAIL("a replaced generation was accepted"); },
             [&](caf::error& err) { refused = err; });
  REQUIRE(refused);
  auto text = sys.render(*refused);
  CAPTURE(text);
  CHECK(text.find("decode-0 tp0 pp0 is of generation 4 of decode-0, which generation 12 "
                  "replaced") != std::string::npos);
  CHECK(refused->code() == static_cast<uint8_t>(errc::instance_restarted));

  // A request of the replaced generation for a live room: the decider it
  // names hears the refusal; the room on the current generation is untouched.
  auto live = open_room(8, {9, 10}, {11, 12}, 3, 3, 2);
  auto stale_decider = caf::actor_cast<decider_actor>(caf::actor{self});
  self->send(p,
             room_request{room_key{8, 1}, old_rank, stale_decider, {1, 2}, no_aux_slot, {}, false});
  sched.run();
  std::optional<room_failure> told;
  self->receive([&](room_failure& f) { told = f; }, caf::after(std::chrono::seconds{0}) >> [] {});
  REQUIRE(told);
  CHECK(told->why.code == errc::instance_restarted);
  CHECK(told->why.origin.side == role::prefill);
  CHECK(told->why.origin.instance == "prefill-0");
  CHECK(live.senders[0].poll() == kv_poll::success);
  CHECK(live.receivers[0].poll() == kv_poll::success);
  CHECK(decode[0].pool->holds_room(seed, 8, {11, 12}, 3));
}

// A decode rank asked prefill tp0 for the room, and its instance died before
// decode tp1 asked prefill tp1: tp0 loses the room's decider, tp1 never knew
// it. tp0 tells tp1, which concludes with tp0's cause at once instead of
// waiting for its Bootstrapping deadline to word it otherwise.
TEST_CASE_METHOD(instance_fixture,
                 "a prefill rank no decode rank asked concludes with its sibling's cause when "
                 "the decode instance dies",
                 "[actors][rejoin]") {
  start(2, 1, 2, 1);
  auto receiver = decode[0].rt->make_receiver(6, where());
  receiver.init({5, 6}, 1);
  room_handles room;
  for (auto& r : prefill) {
    r.pool->fill_room(seed, 6, {1, 2}, 1);
    room.senders.push_back(r.rt->make_sender(6));
    room.senders.back().init(2, 1);
  }
  sched.run();
  REQUIRE(state_of<prefill_rank_state>(prefill[0].rt->prefill()).deciders.count(6) == 1u);
  REQUIRE(state_of<prefill_rank_state>(prefill[1].rt->prefill()).deciders.count(6) == 0u);

  kill_decode();
  sched.run();  // no virtual time passes: no deadline fires
  auto why = one_failure(room.senders);
  CHECK(why.code == errc::peer_down);
  CHECK(why.cause.find("decode-0") != std::string::npos);
}
