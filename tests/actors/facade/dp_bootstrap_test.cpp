// DP attention behind one bootstrap: each DP group of a prefill instance
// registers in a directory of its own behind the instance's one bootstrap
// (as SGLang's one bootstrap port serves every DP group). A room named for a
// group reaches that group's ranks alone; a group that is out of range or a
// DP size that contradicts the ranks' is refused, naming the values.
#include "tests/support/instance_fixture.hpp"

#include "actors/bootstrap/directory.hpp"
#include "actors/bootstrap/room_routes.hpp"
#include "messages/bootstrap.hpp"

using namespace kvferry;
using namespace kvferry::test;

namespace {

struct dp_fixture : instance_fixture {
  /// Asks `boot` for DP group `group` of `size`: the handle, or the refusal.
  caf::expected<bootstrap_actor> group_of(uint32_t group, uint32_t size) {
    auto rh = self->request(boot, caf::infinite, dp_group_atom_v, group, size);
    sched.run();
    caf::expected<bootstrap_actor> out{caf::error{}};
    rh.receive([&](caf::strong_actor_ptr& p) { out = caf::actor_cast<bootstrap_actor>(p); },
               [&](caf::error& err) { out = err; });
    return out;
  }

  /// What `b` answers to `xs...` (the test fails on a refusal).
  template <class T, class... Ts>
  T answer(const bootstrap_actor& b, Ts... xs) {
    auto rh = self->request(b, caf::infinite, xs...);
    sched.run();
    std::optional<T> out;
    rh.receive([&](T& x) { out = std::move(x); },
               [&](caf::error& err) { FAIL("refused: " << sys.render(err)); });
    REQUIRE(out);
    return std::move(*out);
  }

  topology topology_of(const bootstrap_actor& b) { return answer<topology>(b, topology_atom_v); }

  /// The refusal `b` answers to `xs...`, rendered ("" when it accepted).
  template <class... Ts>
  std::string refusal(const bootstrap_actor& b, Ts... xs) {
    auto rh = self->request(b, caf::infinite, xs...);
    sched.run();
    std::string out;
    rh.receive([](bool) {}, [&](caf::error& err) { out = sys.render(err); });
    return out;
  }
};

}  // namespace

TEST_CASE_METHOD(dp_fixture,
                 "DP attention: a prefill DP group registers in a directory of its own behind "
                 "the instance's bootstrap - a room named for it moves every byte",
                 "[actors][dp]") {
  dp_group = 1;
  dp_size = 2;
  start(2, 1, 1, 1);
  CHECK(answer<uint32_t>(boot, dp_group_atom_v) == 2u);
  // The instance's own directory holds no rank: the group's does.
  CHECK(topology_of(boot).ranks.empty());
  auto g1 = group_of(1, 0);  // a decode rank does not know the DP size
  REQUIRE(g1);
  auto topo = topology_of(*g1);
  CHECK(topo.instance == "prefill-0/dp1");
  CHECK(topo.complete());
  CHECK(group_of(1, 2).value() == *g1);  // made once

  auto h = open_room(70, {0, 1, 2}, {5, 6, 7}, 1, 2, 1);
  sched.run();
  for (auto& r : h.receivers) {
    CAPTURE(r.failure() ? to_string(r.failure()->why) : std::string{"-"});
    REQUIRE(r.poll() == kv_poll::success);
  }
  for (auto& s : h.senders)
    REQUIRE(s.poll() == kv_poll::success);
  CHECK(decode[0].pool->holds_room(seed, 70, {5, 6, 7}, 2));
}

TEST_CASE_METHOD(dp_fixture,
                 "DP attention: a room named for a DP group no rank serves ends by its "
                 "deadline - the other group's ranks never hear of it",
                 "[actors][dp]") {
  dp_group = 1;
  dp_size = 2;
  start(1, 1, 1, 1);
  auto r = decode[0].rt->make_receiver(71, bootstrap_locator{boot, "", 0, 0, 0});
  r.init({4, 5}, 1);
  sched.run();
  CHECK(r.poll() == kv_poll::bootstrapping);
  pass(limits.bootstrapping + limits.verdict + std::chrono::seconds{1});
  REQUIRE(r.poll() == kv_poll::failed);
  CAPTURE(to_string(r.failure()->why));
  CHECK(state_of<prefill_rank_state>(prefill[0].rt->prefill()).rooms.count(71) == 0);
  // The group that serves goes on serving.
  auto h = open_room(72, {0, 1}, {6, 7}, 1, 2, 1);
  sched.run();
  CHECK(h.receivers[0].poll() == kv_poll::success);
}

TEST_CASE_METHOD(dp_fixture,
                 "DP attention: a DP group out of range or a DP size the ranks contradict is "
                 "refused, naming the values",
                 "[actors][dp]") {
  dp_group = 0;
  dp_size = 2;
  start(1, 1, 1, 1);
  auto render = [&](const caf::expected<bootstrap_actor>& e) {
    return e ? std::string{"accepted"} : sys.render(e.error());
  };
  CHECK_THAT(render(group_of(2, 2)),
             Catch::Contains("DP group 2 of prefill instance prefill-0: expected a group from "
                             "0 to 1 (dp_size 2)"));
  CHECK_THAT(render(group_of(2, 0)), Catch::Contains("expected a group from 0 to 1"));
  CHECK_THAT(render(group_of(0, 3)),
             Catch::Contains("the rank says the instance has 3 DP groups, its other ranks "
                             "said 2"));
  CHECK_THAT(render(group_of(0, 5000)), Catch::Contains("dp_size 5000, expected 1 to 1024"));
  // The groups that fit still serve.
  auto h = open_room(73, {0, 1}, {6, 7}, 1, 2, 1);
  sched.run();
  CHECK(h.receivers[0].poll() == kv_poll::success);
}

TEST_CASE("DP groups: the bootstrap's checks, as plain logic", "[logic][dp]") {
  CHECK_FALSE(dp_group_problem("p", 0, 0, 0));
  CHECK_FALSE(dp_group_problem("p", 0, 7, 8));
  CHECK_FALSE(dp_group_problem("p", 8, 7, 0));
  CHECK(*dp_group_problem("p", 8, 8, 0) ==
        "DP group 8 of prefill instance p: expected a group from 0 to 7 (dp_size 8)");
  CHECK(*dp_group_problem("p", 0, 1024, 0) ==
        "DP group 1024 of prefill instance p: expected a group from 0 to 1023");
  CHECK(*dp_group_problem("p", 4, 0, 2) ==
        "DP group 0 of prefill instance p: the rank says the instance has 2 DP groups, its "
        "other ranks said 4");
  CHECK(dp_group_instance("prefill-0", 3) == "prefill-0/dp3");
  CHECK(bootstrap_locator{{}, "10.0.0.1", 8998, 2, 4}.key() == "10.0.0.1:8998/dp2");
  CHECK(bootstrap_locator{{}, "10.0.0.1", 8998}.key() == "10.0.0.1:8998");
}

TEST_CASE_METHOD(dp_fixture,
                 "DP attention: a DP group's bootstrap that ends takes only its group with it - "
                 "the instance's bootstrap makes it again, and ends every group's with its own",
                 "[actors][dp]") {
  dp_group = 1;
  dp_size = 2;
  start(1, 1, 1, 1);
  auto g0 = group_of(0, 2);
  REQUIRE(g0);
  auto g1 = group_of(1, 0);
  REQUIRE(g1);
  caf::anon_send_exit(*g0, caf::exit_reason::kill);
  sched.run();
  // Group 1 still serves, and so does the instance's bootstrap.
  auto h = open_room(74, {0, 1}, {6, 7}, 1, 2, 1);
  sched.run();
  CHECK(h.receivers[0].poll() == kv_poll::success);
  auto again = group_of(0, 2);
  REQUIRE(again);
  CHECK(*again != *g0);

  caf::anon_send_exit(boot, caf::exit_reason::kill);
  sched.run();
  for (auto& g : {*again, *g1}) {
    auto rh = self->request(g, caf::infinite, topology_atom_v);
    sched.run();
    rh.receive([](topology&) { FAIL("a DP group's bootstrap outlived its instance's"); },
               [](caf::error&) {});
  }
}

TEST_CASE_METHOD(dp_fixture,
                 "DP attention without follow_bootstrap_room: a prefill rank registers a room's "
                 "DP group, a decode rank asks for it, and the room moves from that group",
                 "[actors][dp]") {
  dp_group = 1;
  dp_size = 2;
  start(1, 1, 1, 1);
  // Until a prefill rank says otherwise, rooms follow bootstrap_room % dp_size.
  CHECK(answer<bool>(boot, dp_route_atom_v));
  CHECK_FALSE(answer<bool>(boot, dp_route_atom_v, false));
  CHECK_FALSE(answer<bool>(boot, dp_route_atom_v));
  CHECK_FALSE(answer<bool>(boot, dp_route_atom_v, false));  // the same word again
  CHECK_THAT(refusal(boot, dp_route_atom_v, true),
             Catch::Contains("prefill instance prefill-0 routes rooms to DP groups by registered "
                             "rooms as its ranks said; refused a rank's follow_bootstrap_room"));

  // Room 76 is even, and served by group 1.
  CHECK(answer<bool>(boot, dp_route_atom_v, uint64_t{76}, uint32_t{1}));
  CHECK(answer<bool>(boot, dp_route_atom_v, uint64_t{76}, uint32_t{1}));  // every rank registers
  CHECK_THAT(refusal(boot, dp_route_atom_v, uint64_t{76}, uint32_t{0}),
             Catch::Contains("room 76 of prefill instance prefill-0 is served by DP group 1; "
                             "refused DP group 0"));
  CHECK_THAT(refusal(boot, dp_route_atom_v, uint64_t{77}, uint32_t{2}),
             Catch::Contains("room 77 of prefill instance prefill-0: DP group 2; expected 0 to 1 "
                             "(dp_size 2)"));
  auto found = answer<room_dp_groups>(boot, room_dp_query{{75, 76, 77}});
  CHECK(found.rooms == std::vector<uint64_t>{76});
  CHECK(found.groups == std::vector<uint32_t>{1});

  auto h = open_room(76, {0, 1}, {6, 7}, 1, 2, 1);
  sched.run();
  REQUIRE(h.receivers[0].poll() == kv_poll::success);
  CHECK(decode[0].pool->holds_room(seed, 76, {6, 7}, 2));
}

TEST_CASE_METHOD(dp_fixture,
                 "DP attention: a room's DP group registered before any rank said the DP size, "
                 "and a query past the bound, are refused, naming why",
                 "[actors][dp]") {
  dp_group = bootstrap_locator::whole;  // a plain instance: no DP size said
  start(1, 1, 1, 1);
  CHECK_THAT(refusal(boot, dp_route_atom_v, uint64_t{80}, uint32_t{0}),
             Catch::Contains("room 80 of prefill instance prefill-0: DP group 0 registered "
                             "before any rank said the instance's DP size"));
  auto found = answer<room_dp_groups>(boot, room_dp_query{{80}});
  CHECK(found.rooms.empty());
  // A query past the bound is refused whole, naming its size.
  auto rh = self->request(boot, caf::infinite, room_dp_query{std::vector<uint64_t>(65537, 1)});
  sched.run();
  std::string why;
  rh.receive([](room_dp_groups&) {}, [&](caf::error& err) { why = sys.render(err); });
  CHECK_THAT(why, Catch::Contains("a query of the DP groups of 65537 rooms; expected at most "
                                  "65536"));
  // The instance serves its rooms as before.
  auto h = open_room(81, {0, 1}, {6, 7}, 1, 2, 1);
  sched.run();
  CHECK(h.receivers[0].poll() == kv_poll::success);
}

TEST_CASE("DP routing: the rooms' groups, as plain logic", "[logic][dp]") {
  using namespace std::chrono_literals;
  room_routes routes{3, 10s};
  auto s = [](int64_t n) { return n * 1'000'000'000; };
  CHECK(routes.follows_room());
  CHECK_FALSE(routes.set_follows_room(false, "p"));
  CHECK_FALSE(routes.follows_room());
  CHECK(*routes.set_follows_room(true, "p") ==
        "prefill instance p routes rooms to DP groups by registered rooms as its ranks said; "
        "refused a rank's follow_bootstrap_room (expected every rank of the instance with one "
        "load_balance_method)");

  CHECK_FALSE(routes.add(1, 0, 4, "p", s(0)));
  CHECK_FALSE(routes.add(1, 0, 4, "p", s(1)));  // the same group: no change
  CHECK(*routes.add(1, 3, 4, "p", s(1)) ==
        "room 1 of prefill instance p is served by DP group 0; refused DP group 3 (two requests "
        "with one bootstrap_room?)");
  CHECK(*routes.add(2, 4, 4, "p", s(1)) ==
        "room 2 of prefill instance p: DP group 4; expected 0 to 3 (dp_size 4)");
  CHECK(routes.add(2, 0, 0, "p", s(1)).has_value());
  CHECK_FALSE(routes.add(2, 2, 4, "p", s(2)));
  CHECK_FALSE(routes.add(3, 3, 4, "p", s(3)));
  using pairs = std::vector<std::pair<uint64_t, uint32_t>>;
  CHECK(routes.find({3, 9, 1, 2}, s(3)) == pairs{{3, 3}, {1, 0}, {2, 2}});
  // Full: the oldest room goes first.
  CHECK_FALSE(routes.add(4, 1, 4, "p", s(4)));
  CHECK(routes.evicted() == 1);
  CHECK(routes.find({1, 4}, s(4)) == pairs{{4, 1}});
  // By age: room 2 was registered at 2 s and is gone at 12 s; rooms 3 and 4 stay.
  CHECK(routes.find({2, 3, 4}, s(12)) == pairs{{3, 3}, {4, 1}});
  CHECK(routes.size() == 2);
  CHECK(routes.find({3, 4}, s(14)).empty());
  CHECK(routes.evicted() == 1);  // age is not counted as eviction
}
