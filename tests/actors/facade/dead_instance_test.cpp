// Fail fast on a known-dead or known-lost peer: a room that needs a prefill
// instance whose bootstrap saw a rank leave (and not come back), or a rank
// that the decider declared lost by heartbeats, fails at once on every rank
// of both instances with one cause, instead of waiting for a deadline or a
// silence of its own; once the rank is back, rooms go through again without
// restarting anything on the decode side. Deterministic (CAF's test
// coordinator): "at once" means with no virtual time passing.
#include "tests/support/instance_fixture.hpp"

#include "actors/common/decider_lost.hpp"
#include "actors/rank/decode_rank.hpp"

using namespace kvferry;
using namespace kvferry::test;

TEST_CASE_METHOD(instance_fixture,
                 "a prefill rank that left: new rooms to its instance fail at once on every "
                 "rank with the instance's death, and go through again once it is back",
                 "[actors][fail-fast]") {
  start(2, 1, 2, 1);
  auto warm = open_room(1, {1, 2}, {3, 4}, 1, 1, 0);
  sched.run();
  for (auto& r : warm.receivers)
    REQUIRE(r.poll() == kv_poll::success);

  caf::anon_send_exit(prefill[1].rt->prefill(), caf::exit_reason::kill);
  sched.run();

  // Room 2: both decode ranks and the surviving prefill rank open it.
  room_handles next;
  for (auto& r : decode) {
    next.receivers.push_back(r.rt->make_receiver(2, where()));
    next.receivers.back().init({5, 6}, 2);
  }
  prefill[0].pool->fill_room(seed, 2, {1, 2}, 2);
  next.senders.push_back(prefill[0].rt->make_sender(2));
  next.senders.back().init(2, 2);
  next.senders.back().send({1, 2}, true);
  sched.run();  // no virtual time passes: no deadline, no silence
  auto why = one_failure(next.receivers);
  CHECK(why.code == errc::instance_dead);
  CHECK(why.origin == instance_ref(role::prefill, "prefill-0", 3));
  CHECK_THAT(why.cause, Catch::StartsWith("prefill instance prefill-0 is dead: prefill-0 tp1 pp0 "
                                          "left at "));
  CHECK_THAT(why.cause, Catch::Contains("its actor ended"));
  // The surviving prefill rank concludes the same, from the same verdict.
  REQUIRE(next.senders[0].failure());
  CHECK(next.senders[0].failure()->why == why);

  // A second room fails the same way, also at once.
  auto third = open_room(3, {3}, {7}, 3, 3, 0);  // tp1's runtime is dead: its sender fails alone
  sched.run();
  CHECK(third.receivers[0].failure()->why == why);
  CHECK(third.receivers[1].failure()->why == why);
  CHECK(third.senders[0].failure()->why == why);

  // The rank comes back (a new process registers with the same bootstrap):
  // the decode ranks hear it from the bootstrap and take rooms again.
  replace_prefill_rank(1, 2, 1);
  sched.run();
  auto back = open_room(4, {4, 5}, {8, 9}, 4, 4, 0);
  sched.run();
  for (auto& s : back.senders)
    CHECK(s.poll() == kv_poll::success);
  for (size_t k = 0; k < decode.size(); ++k) {
    CHECK(back.receivers[k].poll() == kv_poll::success);
    CHECK(decode[k].pool->holds_room(seed, 4, {8, 9}, 4));
  }
}

TEST_CASE_METHOD(instance_fixture,
                 "the bootstrap's record of a departure words the cause alike for every rank",
                 "[actors][fail-fast]") {
  rank_left gone{rank_ref{role::prefill, "p", 7, 1, 0},
                 "remote_link_unreachable",
                 false,
                 true,
                 1'733'054'401'234'000'000,
                 "10.0.0.5:8998"};
  auto a = instance_dead("p", 7, gone);
  auto b = instance_dead("p", 7, gone);
  CHECK(a == b);
  CHECK(a.code == errc::instance_dead);
  CHECK(a.cause ==
        "prefill instance p (bootstrap 10.0.0.5:8998) is dead: p tp1 pp0 left at 2024-12-01 "
        "12:00:01.234 UTC: its process or its link was lost (remote_link_unreachable)");
  // A topology with two departures names the earliest, whatever the order.
  topology t;
  t.instance = "p";
  t.instance_generation = 7;
  auto later = gone;
  later.rank.tp = 0;
  later.left_at_ns += 5;
  t.departed = {later, gone};
  CHECK(instance_dead(t) == a);
  t.departed = {gone, later};
  CHECK(instance_dead(t) == a);
  t.departed.clear();
  CHECK_FALSE(instance_dead(t));
}

TEST_CASE_METHOD(instance_fixture,
                 "a prefill rank declared lost by heartbeats: new rooms fail at once with the "
                 "same cause until it answers again",
                 "[actors][fail-fast]") {
  start(2, 1, 2, 1);
  auto warm = open_room(1, {1, 2}, {3, 4}, 1, 1, 0);
  sched.run();
  for (auto& r : warm.receivers)
    REQUIRE(r.poll() == kv_poll::success);

  // tp1 stops answering (a frozen process: nothing drops).
  freeze(prefill[1].rt->prefill());
  freeze(prefill[1].rt->transfer());
  room_handles slow;
  for (auto& r : decode) {
    slow.receivers.push_back(r.rt->make_receiver(2, where()));
    slow.receivers.back().init({5, 6}, 2);
  }
  for (auto& r : prefill) {
    r.pool->fill_room(seed, 2, {1, 2}, 2);
    slow.senders.push_back(r.rt->make_sender(2));
    slow.senders.back().init(2, 2);
  }
  pass(limits.silence() + 4 * limits.heartbeat);
  auto why = one_failure(slow.receivers);
  CHECK(why.code == errc::heartbeat_lost);
  CHECK(why.origin.tp == 1);

  // A new room names tp1 again: it fails at once, with the same cause.
  room_handles fast;
  for (auto& r : decode) {
    fast.receivers.push_back(r.rt->make_receiver(3, where()));
    fast.receivers.back().init({7}, 3);
  }
  run_live();  // no virtual time passes
  CHECK(one_failure(fast.receivers) == why);

  // It answers again: the probes find it, and rooms go through.
  thaw(prefill[1].rt->prefill());
  thaw(prefill[1].rt->transfer());
  pass(limits.silence() + 4 * limits.heartbeat);
  auto back = open_room(4, {4, 5}, {8, 9}, 4, 4, 0);
  pass(limits.heartbeat);
  for (size_t k = 0; k < decode.size(); ++k) {
    CHECK(back.receivers[k].poll() == kv_poll::success);
    CHECK(decode[k].pool->holds_room(seed, 4, {8, 9}, 4));
  }
}

// A decode rank reached its source through a node whose link is what died
// (no down_msg reaches it), and the decider's verdict of lost contact comes
// first: the rank looks the instance up at once, and when its bootstrap
// cannot be reached either, takes it for down, as a down_msg would have
// said. New rooms fail at once instead of waiting out their Bootstrapping
// deadline: which of the two a rank hears first decides nothing.
TEST_CASE_METHOD(instance_fixture,
                 "a verdict of lost contact, then a bootstrap that cannot be reached: new rooms "
                 "fail at once, as after a down_msg",
                 "[actors][fail-fast]") {
  start(1, 1, 1, 1);
  auto warm = open_room(1, {1, 2}, {3, 4}, 1, 1, 0);
  sched.run();
  REQUIRE(warm.receivers[0].poll() == kv_poll::success);

  // Room 2 is under way (the prefill side waits for its scheduler's pages).
  auto receiver = decode[0].rt->make_receiver(2, where());
  receiver.init({5, 6}, 2);
  prefill[0].pool->fill_room(seed, 2, {1, 2}, 2);
  auto sender = prefill[0].rt->make_sender(2);
  sender.init(2, 2);
  sched.run();
  auto d = decode[0].rt->decode();
  auto& st = state_of<decode_rank_state>(d);
  REQUIRE(st.rooms.at(2).has_sources());
  auto key = st.rooms.at(2).key();

  // The prefill node is gone, and this rank hears nothing of it: its rank is
  // silent (frozen: no down_msg) and its bootstrap is dead. The decider's
  // verdict of lost contact arrives.
  freeze(prefill[0].rt->prefill());
  freeze(prefill[0].rt->transfer());
  caf::anon_send_exit(boot, caf::exit_reason::kill);
  run_live();
  auto lost = decider_lost(decider_ref("decode-0"));
  caf::send_as(dec, d, room_verdict{key, kv_poll::failed, lost});
  run_live();  // no virtual time passes
  REQUIRE(receiver.failure());
  CHECK(receiver.failure()->why == lost);
  REQUIRE(st.peers.size() == 1u);
  auto& peer = st.peers.begin()->second;
  CHECK(peer.phase == prefill_peer::stage::down);

  // A new room to it fails at once, naming the rank it was bound to.
  auto next = decode[0].rt->make_receiver(3, where());
  next.init({7}, 3);
  run_live();  // no virtual time passes
  REQUIRE(next.poll() == kv_poll::failed);
  auto why = next.failure()->why;
  CHECK(why.code == errc::peer_down);
  CHECK(why.origin == rank_ref{role::prefill, "prefill-0", 3, 0, 0});
  CHECK_THAT(why.cause, Catch::StartsWith("prefill prefill-0 tp0 pp0 went down (contact was lost, "
                                          "and "));
  CHECK_THAT(why.cause, Catch::Contains("cannot be reached"));
}
