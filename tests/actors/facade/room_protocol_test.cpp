// The room protocol message by message on CAF's deterministic scheduler: one
// prefill rank, one decode rank, the bootstrap and the transfer actor, and
// every state both sides publish on the way.
#include "tests/support/pair_fixture.hpp"

using namespace kvferry;
using namespace kvferry::test;

namespace {

struct protocol_fixture : pair_fixture {
  prefill_rank_actor p() { return prefill.rt->prefill(); }
  decode_rank_actor d() { return decode.rt->decode(); }
  transfer_actor t() { return prefill.rt->transfer(); }
};

}  // namespace

TEST_CASE_METHOD(protocol_fixture, "registration: the prefill rank joins its bootstrap",
                 "[actors][protocol]") {
  boot = sys.spawn(bootstrap, std::string{"prefill-0"}, uint64_t{7});
  sched.run();
  prefill = make_rank(role::prefill, shape, page_size, "prefill-0");
  // The rank registers as soon as it starts.
  REQUIRE(sched.prioritize(p()));
  sched.run_once();
  expect((rank_registration), from(p()).to(boot));
  // Every registered rank hears the instance's topology after each change
  // (whole now), then the answer.
  expect((topology), from(boot).to(p()));
  expect((registration_ack), from(boot).to(p()).with(registration_ack{"prefill-0", 7}));
  auto topo = ask<topology>(boot, topology_atom_v);
  REQUIRE(topo.complete());
  CHECK(topo.ranks.front().rank.instance == "prefill-0");
  CHECK(topo.ranks.front().rank.instance_generation == 7u);
}

TEST_CASE_METHOD(protocol_fixture, "a room walks every state on both sides - step by step",
                 "[actors][protocol]") {
  start();
  auto dec = decode.rt->decider();
  // Decode opens the room: it asks the decider for the room's key and the
  // bootstrap for the prefill topology.
  auto r = decode.rt->make_receiver(42, where());
  expect((room_open_atom, uint64_t, bootstrap_locator, room_slot_ptr),
         from(_).to(d()).with(_, 42u, _, _));
  CHECK(r.poll() == kv_poll::bootstrapping);
  expect((room_join), from(d()).to(dec));
  expect((room_keyed), from(dec).to(d()));
  expect((topology_atom), from(d()).to(boot));
  expect((topology), from(boot).to(d()));
  // Handshake: the layouts pair, the prefill rank's transport connects.
  expect((dest_registration), from(d()).to(p()));
  expect((peer_connect), from(p()).to(t()));
  expect((dest_accepted), from(p()).to(d()));
  CHECK(r.poll() == kv_poll::bootstrapping);
  // The decider learns the room's prefill participants; only once it has
  // keyed that join may requests go to them (a verdict will reach them).
  expect((room_join), from(d()).to(dec));
  expect((room_keyed), from(dec).to(d()));
  CHECK(r.poll() == kv_poll::waiting_for_input);

  // Decode reserves pages 10, 11, 12, 30 and aux row 3; prefill has not opened
  // the room yet, so the request waits there.
  std::vector<uint32_t> dst{10, 11, 12, 30};
  r.init(dst, 3);
  expect((receiver_init), from(_).to(d()));
  expect((room_request), from(d()).to(p()).with(_));

  // Prefill opens the room: the waiting request binds it at once.
  std::vector<uint32_t> src{5, 6, 40, 41};
  fill(*prefill.pool, 42, src, 2);
  auto s = prefill.rt->make_sender(42);
  expect((room_open_atom, uint64_t, room_slot_ptr), from(_).to(p()).with(_, 42u, _));
  CHECK(s.poll() == kv_poll::waiting_for_input);

  s.init(4, 2);
  expect((sender_init), from(_).to(p()));
  s.send({5, 6}, false);
  expect((chunk_send), from(_).to(p()));
  expect((chunk_job), from(p()).to(t()));
  CHECK(s.poll() == kv_poll::transferring);
  expect((batch_done), from(_).to(t()));
  expect((chunk_result), from(t()).to(p()));
  expect((chunk_landed), from(p()).to(d()));
  CHECK(r.poll() == kv_poll::transferring);

  s.send({40, 41}, true);
  expect((chunk_send), from(_).to(p()));
  expect((chunk_job), from(p()).to(t()));
  expect((batch_done), from(_).to(t()));
  expect((chunk_result), from(t()).to(p()));
  // Both sides finished their parts; neither concludes on its own word.
  expect((chunk_landed), from(p()).to(d()));
  expect((room_finished), from(p()).to(dec));
  expect((room_finished), from(d()).to(dec));
  CHECK(r.poll() == kv_poll::transferring);
  CHECK(s.poll() == kv_poll::transferring);
  // The decider's verdict goes to every participant.
  expect((room_verdict), from(dec).to(d()));
  expect((room_verdict), from(dec).to(p()));
  CHECK(r.poll() == kv_poll::success);
  CHECK(s.poll() == kv_poll::success);
  CHECK(holds(*decode.pool, 42, dst, 3));
  CHECK_FALSE(r.failure());
  CHECK_FALSE(s.failure());
}

TEST_CASE_METHOD(protocol_fixture, "chunks sent before the destination is known wait in the rank",
                 "[actors][protocol]") {
  start();
  std::vector<uint32_t> src{1, 2, 3};
  fill(*prefill.pool, 7, src, 0);
  auto s = prefill.rt->make_sender(7);
  s.init(3, 0);
  s.send(src, true);
  sched.run();
  CHECK(s.poll() == kv_poll::bootstrapping);
  std::vector<uint32_t> dst{20, 9, 4};
  auto r = decode.rt->make_receiver(7, where());
  r.init(dst, 1);
  sched.run();
  CHECK(r.poll() == kv_poll::success);
  CHECK(s.poll() == kv_poll::success);
  CHECK(holds(*decode.pool, 7, dst, 1));
}

TEST_CASE_METHOD(protocol_fixture, "a room of zero pages still moves its aux row",
                 "[actors][protocol]") {
  start();
  fill(*prefill.pool, 9, {}, 5);
  auto s = prefill.rt->make_sender(9);
  auto r = decode.rt->make_receiver(9, where());
  r.init({}, 6);
  s.init(0, 5);
  s.send({}, true);
  sched.run();
  CHECK(r.poll() == kv_poll::success);
  CHECK(s.poll() == kv_poll::success);
  CHECK(holds(*decode.pool, 9, {}, 6));
}

TEST_CASE_METHOD(protocol_fixture, "an actor scheduler polls by message", "[actors][protocol]") {
  start();
  auto s = prefill.rt->make_sender(11);
  sched.run();
  auto st = ask<room_status>(p(), room_poll_atom_v, uint64_t{11});
  CHECK(st.state == kv_poll::bootstrapping);
  CHECK(st.key.room == 11u);
}

TEST_CASE_METHOD(protocol_fixture, "a cleared room is never resurrected by late messages",
                 "[actors][protocol]") {
  start();
  std::vector<uint32_t> src{1, 2};
  std::vector<uint32_t> dst{3, 4};
  fill(*prefill.pool, 12, src, 0);
  room_key key;
  {
    auto s = prefill.rt->make_sender(12);
    auto r = decode.rt->make_receiver(12, where());
    r.init(dst, 0);
    s.init(2, 0);
    s.send(src, true);
    sched.run();
    REQUIRE(r.poll() == kv_poll::success);
    key = ask<room_status>(d(), room_poll_atom_v, uint64_t{12}).key;
  }  // both handles clear their rooms
  sched.run();
  // Late messages about the cleared room, from either side.
  rank_ref p0 = prefill.rt->rank();
  caf::anon_send(d(), chunk_landed{key, p0, 0, 2, 64, true});
  caf::anon_send(d(), room_verdict{key, kv_poll::failed, failure{errc::deadline, "late", p0}});
  caf::anon_send(p(), room_verdict{key, kv_poll::failed, failure{errc::aborted, "late", p0}});
  sched.run();
  auto rh = self->request(d(), caf::infinite, room_poll_atom_v, uint64_t{12});
  sched.run();
  rh.receive([](room_status&) { FAIL("the cleared room came back on decode"); },
             [](caf::error& err) { CHECK(to_failure(err, {}).code == errc::unknown_room); });
  auto rh2 = self->request(p(), caf::infinite, room_poll_atom_v, uint64_t{12});
  sched.run();
  rh2.receive([](room_status&) { FAIL("the cleared room came back on prefill"); },
              [](caf::error& err) { CHECK(to_failure(err, {}).code == errc::unknown_room); });
  // The id opened again is a new room: the late verdict did not stick to it.
  auto s2 = prefill.rt->make_sender(12);
  sched.run();
  CHECK(s2.poll() == kv_poll::bootstrapping);
}
