// State components beside the paged KV: a single-slot one (Mamba-like) and a
// page-indexed one (sliding-window-like) travel with the last chunk, before
// the aux row; with different TP sizes they are refused at handshake, never
// discovered in the middle of a transfer.
#include "tests/support/instance_fixture.hpp"

#include "apps/common/kv_pattern.hpp"

using namespace kvferry;
using namespace kvferry::test;

namespace {

struct state_fixture : instance_fixture {
  state_fixture() {
    states = {{state_kind::single_slot, 2, 4, 128}, {state_kind::page_indexed, 1, 16, 64}};
  }

  void fill_states(const apps::host_pool& pool, uint64_t room,
                   const std::vector<std::vector<uint32_t>>& idx) {
    for (size_t c = 0; c < idx.size(); ++c)
      for (uint32_t b = 0; b < pool.state_specs()[c].buffers; ++b)
        for (uint32_t i = 0; i < idx[c].size(); ++i)
          apps::fill_state(pool.state_item(c, b, idx[c][i]), pool.state_specs()[c].item_bytes, seed,
                           room, static_cast<uint32_t>(c), b, i);
  }

  bool holds_states(const apps::host_pool& pool, uint64_t room,
                    const std::vector<std::vector<uint32_t>>& idx) {
    for (size_t c = 0; c < idx.size(); ++c)
      for (uint32_t b = 0; b < pool.state_specs()[c].buffers; ++b)
        for (uint32_t i = 0; i < idx[c].size(); ++i)
          if (!apps::check_state(pool.state_item(c, b, idx[c][i]), pool.state_specs()[c].item_bytes,
                                 seed, room, static_cast<uint32_t>(c), b, i))
            return false;
    return true;
  }
};

}  // namespace

TEST_CASE_METHOD(state_fixture, "state components land with the last chunk - on every rank",
                 "[actors][state]") {
  auto tp = GENERATE(1u, 2u);
  start(tp, 1, tp, 1);
  std::vector<std::vector<uint32_t>> src_states{{2}, {3, 4, 9}};
  std::vector<std::vector<uint32_t>> dst_states{{1}, {10, 0, 5}};
  std::vector<receiver> rs;
  std::vector<sender> ss;
  for (auto& r : decode) {
    rs.push_back(r.rt->make_receiver(5, where()));
    rs.back().init({6, 7}, 3, dst_states);
  }
  for (auto& r : prefill) {
    r.pool->fill_room(seed, 5, {1, 2}, 2);
    fill_states(*r.pool, 5, src_states);
    ss.push_back(r.rt->make_sender(5));
    ss.back().init(2, 2);
    ss.back().send({1}, false);
    ss.back().send({2}, true, src_states);
  }
  sched.run();
  for (auto& s : ss)
    CHECK(s.poll() == kv_poll::success);
  for (size_t k = 0; k < decode.size(); ++k) {
    CHECK(rs[k].poll() == kv_poll::success);
    CHECK(decode[k].pool->holds_room(seed, 5, {6, 7}, 3));
    CHECK(holds_states(*decode[k].pool, 5, dst_states));
  }
}

TEST_CASE_METHOD(state_fixture, "state indices that do not fit fail the room on both sides",
                 "[actors][state]") {
  start(1, 1, 1, 1);
  auto r = decode[0].rt->make_receiver(6, where());
  r.init({1}, 0, {{1}, {2, 3}});
  auto s = prefill[0].rt->make_sender(6);
  s.init(1, 0);
  s.send({1}, true, {{1}, {2}});  // one page of the windowed state against two
  sched.run();
  REQUIRE(s.poll() == kv_poll::failed);
  REQUIRE(r.poll() == kv_poll::failed);
  CHECK(s.failure()->why == r.failure()->why);
  CHECK_THAT(r.failure()->why.cause,
             Catch::Contains("1 source indices against 2 destination indices"));
}

TEST_CASE_METHOD(state_fixture, "state components with different TP are refused at handshake",
                 "[actors][state]") {
  start(2, 1, 1, 1);
  auto r = decode[0].rt->make_receiver(7, where());
  std::vector<sender> ss;
  for (auto& p : prefill)
    ss.push_back(p.rt->make_sender(7));
  sched.run();
  REQUIRE(r.poll() == kv_poll::failed);
  CHECK(r.failure()->why.code == errc::unsupported);
  CHECK_THAT(r.failure()->why.cause, Catch::Contains("state components need equal TP and PP"));
  for (auto& s : ss) {
    REQUIRE(s.poll() == kv_poll::failed);
    CHECK(s.failure()->why == r.failure()->why);
  }
}
