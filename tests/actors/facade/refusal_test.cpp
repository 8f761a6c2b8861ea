// Bad input costs the room it concerns and nothing else: each refusal names
// the value and what was expected, both sides conclude the same, and the
// rooms beside it carry on.
#include "tests/support/faulty_transport.hpp"
#include "tests/support/pair_fixture.hpp"

#include "actors/decision/decider_actor.hpp"

using namespace kvferry;
using namespace kvferry::test;

namespace {

struct refusal_fixture : pair_fixture {
  /// Runs one room between prefill and `d` to its end; returns the two states.
  std::pair<kv_poll, kv_poll> good_room(rank_under_test& d, uint64_t id) {
    std::vector<uint32_t> src{3, 4, 5};
    std::vector<uint32_t> dst{12, 11, 10};
    fill(*prefill.pool, id, src, 1);
    auto s = prefill.rt->make_sender(id);
    auto r = d.rt->make_receiver(id, where());
    r.init(dst, 2);
    s.init(3, 1);
    s.send(src, true);
    sched.run();
    if (r.poll() == kv_poll::success)
      CHECK(holds(*d.pool, id, dst, 2));
    return {s.poll(), r.poll()};
  }
};

}  // namespace

TEST_CASE_METHOD(refusal_fixture, "a layout mismatch is refused at handshake - naming both values",
                 "[actors][refusal]") {
  start();
  auto which = GENERATE(as<std::string>{}, "page_size", "dtype", "heads");
  CAPTURE(which);
  auto other = shape;
  uint32_t page = page_size;
  std::string expected;
  if (which == "page_size") {
    page = 16;
    expected = "layout mismatch: page_size prefill=4 decode=16";
  } else if (which == "dtype") {
    other.dtype = kv_dtype::fp8_e4m3;
    expected = "layout mismatch: kv dtype prefill=bf16 decode=fp8_e4m3";
  } else {
    other.kv_heads = 4;
    expected = "layout mismatch: total_kv_heads prefill=2 decode=4";
  }
  auto& bad = extra_decode(other, page, "decode-bad");
  auto s = prefill.rt->make_sender(20);
  auto r = bad.rt->make_receiver(20, where());
  r.init({1, 2}, 0);
  sched.run();
  REQUIRE(r.poll() == kv_poll::failed);
  auto why = r.failure()->why;
  CHECK(why.code == errc::layout_mismatch);
  CHECK(why.cause == expected);
  CHECK(why.origin.instance == "decode-bad");
  // The room fails on the prefill side too, with the same cause.
  REQUIRE(s.poll() == kv_poll::failed);
  CHECK(s.failure()->why == why);
  // Nothing else is affected: the good decode rank still moves its room.
  auto [ps, ds] = good_room(decode, 21);
  CHECK(ps == kv_poll::success);
  CHECK(ds == kv_poll::success);
  // Later rooms of the refused pair fail at once, with the same cause.
  auto r2 = bad.rt->make_receiver(22, where());
  sched.run();
  REQUIRE(r2.poll() == kv_poll::failed);
  CHECK(r2.failure()->why.cause == expected);
}

TEST_CASE_METHOD(refusal_fixture, "an instance shape that cannot pair is refused at handshake",
                 "[actors][refusal]") {
  start();
  // Decode PP 2 against prefill PP 1: decode PP must equal prefill PP or be 1.
  auto dec = sys.spawn(decider, std::string{"decode-pp2"}, 1u, 2u, uint64_t{5}, limits);
  auto& pp2 = extra_decode(shape, page_size, "decode-pp2", 1, 2, decider_locator{dec, "", 0});
  sched.run();
  auto s = prefill.rt->make_sender(30);
  auto r = pp2.rt->make_receiver(30, where());
  sched.run();
  REQUIRE(r.poll() == kv_poll::failed);
  CHECK(r.failure()->why.code == errc::unsupported);
  CHECK(r.failure()->why.cause ==
        "decode PP 2 with prefill PP 1: decode PP must equal prefill PP or be 1");
  REQUIRE(s.poll() == kv_poll::failed);
  CHECK(s.failure()->why == r.failure()->why);
  caf::anon_send_exit(dec, caf::exit_reason::kill);
}

TEST_CASE_METHOD(refusal_fixture, "out-of-range destination pages fail that room only",
                 "[actors][refusal]") {
  start();
  auto s = prefill.rt->make_sender(40);
  auto r = decode.rt->make_receiver(40, where());
  r.init({1, pool_pages}, 0);
  s.init(2, 0);
  s.send({1, 2}, true);
  sched.run();
  REQUIRE(r.poll() == kv_poll::failed);
  CHECK(r.failure()->why.code == errc::invalid_pages);
  CHECK(r.failure()->why.cause ==
        "destination page 64 at position 1 out of range, the decode pool holds 64 pages");
  REQUIRE(s.poll() == kv_poll::failed);
  CHECK(s.failure()->why == r.failure()->why);
  auto [ps, ds] = good_room(decode, 41);
  CHECK(ps == kv_poll::success);
  CHECK(ds == kv_poll::success);
}

TEST_CASE_METHOD(refusal_fixture,
                 "a page count that differs between the sides fails the room on both",
                 "[actors][refusal]") {
  start();
  auto init_first = GENERATE(true, false);
  CAPTURE(init_first);
  auto s = prefill.rt->make_sender(43);
  if (init_first) {
    s.init(3, 0);
    sched.run();
  }
  auto r = decode.rt->make_receiver(43, where());
  r.init({1, 2}, 0);
  sched.run();
  if (!init_first)
    s.init(3, 0);
  sched.run();
  REQUIRE(s.poll() == kv_poll::failed);
  REQUIRE(r.poll() == kv_poll::failed);
  CHECK(s.failure()->why.code == errc::invalid_pages);
  CHECK(s.failure()->why.cause == "decode decode-0 tp0 pp0 gave 2 pages for a room of 3 pages");
  CHECK(r.failure()->why == s.failure()->why);
  CHECK(s.failure()->room == r.failure()->room);
}

TEST_CASE_METHOD(refusal_fixture, "out-of-range source pages fail that room only",
                 "[actors][refusal]") {
  start();
  auto s = prefill.rt->make_sender(42);
  auto r = decode.rt->make_receiver(42, where());
  r.init({1, 2}, 0);
  s.init(2, 0);
  s.send({1, 1000}, true);
  sched.run();
  REQUIRE(s.poll() == kv_poll::failed);
  CHECK(s.failure()->why.cause == "source page 1000 out of range, the prefill pool holds 64 pages");
  REQUIRE(r.poll() == kv_poll::failed);
  CHECK(r.failure()->why == s.failure()->why);
}

TEST_CASE_METHOD(refusal_fixture, "a message for a room that is not open is refused as unknown",
                 "[actors][refusal]") {
  start();
  auto s = prefill.rt->make_sender(50);
  sched.run();
  auto rh = self->request(prefill.rt->prefill(), caf::infinite, sender_init{51, 4, 0});
  sched.run();
  bool refused = false;
  rh.receive([] { FAIL("init of room 51 was accepted"); },
             [&](caf::error& err) {
               auto why = to_failure(err, rank_ref{});
               CHECK(why.code == errc::unknown_room);
               CHECK(why.cause == "room 51 is not open on prefill-0 tp0 pp0");
               refused = true;
             });
  CHECK(refused);
  CHECK(s.poll() == kv_poll::bootstrapping);
  auto rh2 = self->request(decode.rt->decode(), caf::infinite, room_abort_atom_v, uint64_t{52});
  sched.run();
  rh2.receive(
      [] { FAIL("abort of room 52 was accepted"); },
      [&](caf::error& err) { CHECK(to_failure(err, rank_ref{}).code == errc::unknown_room); });
}

TEST_CASE_METHOD(refusal_fixture, "a duplicate room is refused - the first one carries on",
                 "[actors][refusal]") {
  start();
  std::vector<uint32_t> src{7, 8};
  std::vector<uint32_t> dst{30, 31};
  fill(*prefill.pool, 60, src, 0);
  auto s1 = prefill.rt->make_sender(60);
  auto s2 = prefill.rt->make_sender(60);
  auto r1 = decode.rt->make_receiver(60, where());
  auto r2 = decode.rt->make_receiver(60, where());
  sched.run();
  REQUIRE(s2.poll() == kv_poll::failed);
  CHECK(s2.failure()->why.code == errc::duplicate_room);
  CHECK(s2.failure()->why.cause == "room 60 is already open on this rank");
  REQUIRE(r2.poll() == kv_poll::failed);
  CHECK(r2.failure()->why.code == errc::duplicate_room);
  r1.init(dst, 0);
  s1.init(2, 0);
  s1.send(src, true);
  sched.run();
  CHECK(s1.poll() == kv_poll::success);
  CHECK(r1.poll() == kv_poll::success);
  CHECK(holds(*decode.pool, 60, dst, 0));
}

TEST_CASE_METHOD(refusal_fixture, "chunks out of sequence fail the room on both sides",
                 "[actors][refusal]") {
  start();
  auto s = prefill.rt->make_sender(70);
  auto r = decode.rt->make_receiver(70, where());
  r.init({1, 2, 3}, 0);
  std::string expected;
  SECTION("a chunk after the last one") {
    s.init(3, 0);
    s.send({1, 2, 3}, true);
    s.send({4}, false);
    expected = "chunk of 1 page after the last one (the room ended at page 3)";
  }
  SECTION("a last chunk that ends early") {
    s.init(3, 0);
    s.send({1, 2}, true);
    expected = "last chunk ends at page 2 of the room's 3 pages";
  }
  SECTION("a chunk before init") {
    s.send({1}, false);
    expected = "chunk of 1 page sent before init";
  }
  sched.run();
  REQUIRE(s.poll() == kv_poll::failed);
  REQUIRE(r.poll() == kv_poll::failed);
  CHECK(s.failure()->why.code == errc::invalid_chunk);
  CHECK(s.failure()->why.cause == expected);
  CHECK(r.failure()->why == s.failure()->why);
  auto [ps, ds] = good_room(decode, 71);
  CHECK(ps == kv_poll::success);
  CHECK(ds == kv_poll::success);
}

TEST_CASE_METHOD(refusal_fixture,
                 "an abort on either side fails the room on both - with its origin",
                 "[actors][refusal]") {
  start();
  auto s = prefill.rt->make_sender(80);
  auto r = decode.rt->make_receiver(80, where());
  r.init({1, 2}, 0);
  s.init(2, 0);
  sched.run();
  auto from_decode = GENERATE(true, false);
  if (from_decode)
    r.abort();
  else
    s.abort();
  sched.run();
  REQUIRE(s.poll() == kv_poll::failed);
  REQUIRE(r.poll() == kv_poll::failed);
  CHECK(s.failure()->why == r.failure()->why);
  CHECK(r.failure()->why.code == errc::aborted);
  CHECK(r.failure()->why.cause ==
        (from_decode ? "aborted by the decode scheduler" : "aborted by the prefill scheduler"));
  CHECK(r.failure()->why.origin.side == (from_decode ? role::decode : role::prefill));
}

TEST_CASE_METHOD(refusal_fixture, "a transport error or an exception fails that room only",
                 "[actors][refusal]") {
  auto plan = std::make_shared<faulty_transport::plan>();
  wrap_prefill_transport = [plan](std::unique_ptr<transport::transport> inner) {
    return std::unique_ptr<transport::transport>{
        std::make_unique<faulty_transport>(std::move(inner), plan)};
  };
  auto throw_instead = GENERATE(false, true);
  CAPTURE(throw_instead);
  if (throw_instead)
    plan->throw_at[1] = "injected exception";
  else
    plan->fail[1] = transport::status::connection_lost("injected: connection reset");
  start();
  auto [p1, d1] = good_room(decode, 90);  // post 0
  CHECK(p1 == kv_poll::success);
  CHECK(d1 == kv_poll::success);

  auto s = prefill.rt->make_sender(91);  // post 1 fails
  auto r = decode.rt->make_receiver(91, where());
  r.init({20, 21}, 3);
  s.init(2, 3);
  s.send({1, 2}, true);
  sched.run();
  REQUIRE(s.poll() == kv_poll::failed);
  REQUIRE(r.poll() == kv_poll::failed);
  auto why = r.failure()->why;
  CHECK(s.failure()->why == why);
  CHECK(why.origin.side == role::prefill);
  if (throw_instead) {
    CHECK(why.code == errc::internal);
    CHECK(why.cause == "exception in the transfer actor: injected exception");
  } else {
    CHECK(why.code == errc::link_lost);  // the link's failure keeps the peer's scope
    CHECK(why.cause ==
          "inproc write to decode-0 tp0 pp0 failed: connection_lost: injected: connection reset");
  }
  // The transfer actor carries on: later rooms move.
  auto [p2, d2] = good_room(decode, 92);
  CHECK(p2 == kv_poll::success);
  CHECK(d2 == kv_poll::success);
}

TEST_CASE_METHOD(refusal_fixture, "a corrupted aux row is refused at commit", "[actors][refusal]") {
  start();
  std::vector<uint32_t> src{1, 2};
  std::vector<uint32_t> dst{3, 4};
  auto s = prefill.rt->make_sender(95);
  auto r = decode.rt->make_receiver(95, where());
  r.init(dst, 2);
  s.init(2, 1);
  sched.run();
  // Step the last chunk to the point where the bytes have landed, then let
  // another writer scribble over the decode aux row before decode commits.
  s.send(src, true);
  auto p = prefill.rt->prefill();
  auto t = prefill.rt->transfer();
  expect((chunk_send), from(_).to(p));
  expect((chunk_job), from(p).to(t));
  expect((batch_done), from(_).to(t));
  expect((chunk_result), from(t).to(p));
  write_stamp(local_pool{decode.rt->layout(), {}, {decode.pool->aux_row(0)}, {}}, 2,
              room_key{94, 3});
  sched.run();
  REQUIRE(r.poll() == kv_poll::failed);
  CHECK(r.failure()->why.code == errc::aux_mismatch);
  CHECK(r.failure()->why.cause ==
        "aux row 2 carries room 94#3, expected " + to_string(r.failure()->room));
  REQUIRE(s.poll() == kv_poll::failed);
  CHECK(s.failure()->why == r.failure()->why);
}

TEST_CASE_METHOD(refusal_fixture, "unusable deadlines are refused at start - naming the value",
                 "[actors][refusal]") {
  start();
  auto pool = std::make_unique<apps::host_pool>(shape, page_size, pool_pages, aux_rows);
  rank_options o;
  o.side = role::decode;
  o.instance = "decode-bad";
  o.pool = pool->describe();
  o.transport = "inproc";
  o.wait_on_stop = false;
  o.limits = limits;
  SECTION("a zero heartbeat") {
    o.limits.heartbeat = std::chrono::nanoseconds{0};
    auto rt = runtime::start(sys, o);
    REQUIRE_FALSE(rt);
    CHECK_THAT(sys.render(rt.error()),
               Catch::Contains("heartbeat-interval = 0ns, expected a positive duration"));
  }
  SECTION("no miss allowed") {
    o.limits.heartbeat_misses = 0;
    auto rt = runtime::start(sys, o);
    REQUIRE_FALSE(rt);
    CHECK_THAT(sys.render(rt.error()),
               Catch::Contains("heartbeat-misses = 0, expected at least 1"));
  }
  // The ranks already running carry on.
  auto r = decode.rt->make_receiver(90, where());
  r.init({1, 2}, 0);
  auto s = prefill.rt->make_sender(90);
  fill(*prefill.pool, 90, {3, 4});
  s.init(2, 0);
  s.send({3, 4}, true);
  sched.run();
  CHECK(s.poll() == kv_poll::success);
  CHECK(r.poll() == kv_poll::success);
}
