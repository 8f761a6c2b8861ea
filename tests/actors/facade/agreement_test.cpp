// Agreement: a fault injected on any single rank, of either instance, makes
// every rank that takes part in the room conclude Failed with the same cause
// and the same origin rank; no rank shows Success where another shows Failed.
#include "tests/support/instance_fixture.hpp"

using namespace kvferry;
using namespace kvferry::test;

namespace {

struct mapping {
  uint32_t p, d;
};

}  // namespace

TEST_CASE_METHOD(instance_fixture, "one rank's fault fails the room on every rank - with its cause",
                 "[actors][agreement]") {
  auto m = GENERATE(mapping{2, 2}, mapping{1, 4}, mapping{4, 1});
  auto fault = GENERATE(as<std::string>{}, "abort", "transport", "bad_pages");
  auto at = GENERATE(range(0u, 5u));  // rank index: prefill ranks first, then decode ranks
  if (at >= m.p + m.d)
    return;
  bool on_prefill = at < m.p;
  if ((fault == "transport" && !on_prefill) || (fault == "bad_pages" && on_prefill))
    return;
  CAPTURE(m.p, m.d, fault, at);
  if (fault == "transport") {
    faults[at] = std::make_shared<faulty_transport::plan>();
    faults[at]->fail[0] = transport::status::connection_lost("injected");
  }
  start(m.p, 1, m.d, 1);

  std::vector<uint32_t> src{1, 2, 3, 4}, dst{5, 6, 7, 8};
  room_handles h;
  for (auto& r : decode) {
    h.receivers.push_back(r.rt->make_receiver(77, where()));
    auto pages = dst;
    if (fault == "bad_pages" && &r == &decode[at - m.p])
      pages[2] = pool_pages + 3;  // out of this rank's pool
    h.receivers.back().init(pages, 0);
  }
  for (auto& r : prefill) {
    r.pool->fill_room(seed, 77, src, 1);
    h.senders.push_back(r.rt->make_sender(77));
    h.senders.back().init(4, 1);
    h.senders.back().send({1, 2}, false);
  }
  sched.run();
  if (fault == "abort") {
    if (on_prefill)
      h.senders[at].abort();
    else
      h.receivers[at - m.p].abort();
  }
  for (auto& s : h.senders)
    s.send({3, 4}, true);
  sched.run();

  rank_ref origin = on_prefill ? prefill[at].rt->rank() : decode[at - m.p].rt->rank();
  std::optional<failure> first;
  auto check = [&](kv_poll state, std::optional<transfer_error> e) {
    REQUIRE(state == kv_poll::failed);
    REQUIRE(e);
    if (!first)
      first = e->why;
    CHECK(e->why == *first);
    CHECK(e->room.room == 77u);
  };
  for (auto& s : h.senders)
    check(s.poll(), s.failure());
  for (auto& r : h.receivers)
    check(r.poll(), r.failure());
  REQUIRE(first);
  CHECK(first->origin.side == origin.side);
  CHECK(first->origin.tp == origin.tp);
  if (fault == "abort")
    CHECK(first->code == errc::aborted);
  if (fault == "transport")  // a dropped connection: the link's failure, peer scope
    CHECK(first->code == errc::link_lost);
  if (fault == "bad_pages")
    CHECK(first->code == errc::invalid_pages);
}

TEST_CASE_METHOD(instance_fixture, "rooms beside a failed one succeed on every rank",
                 "[actors][agreement]") {
  start(2, 1, 2, 1);
  std::vector<room_handles> rooms;
  rooms.push_back(open_room(1, {1, 2}, {3, 4}, 1, 1, 1));
  rooms.push_back(open_room(2, {5, 6}, {7, 8}, 2, 2, 1));
  rooms[0].receivers[1].abort();
  sched.run();
  for (auto& s : rooms[0].senders)
    CHECK(s.poll() == kv_poll::failed);
  for (auto& r : rooms[0].receivers)
    CHECK(r.poll() == kv_poll::failed);
  for (auto& s : rooms[1].senders)
    CHECK(s.poll() == kv_poll::success);
  for (size_t k = 0; k < decode.size(); ++k) {
    CHECK(rooms[1].receivers[k].poll() == kv_poll::success);
    CHECK(decode[k].pool->holds_room(seed, 2, {7, 8}, 2));
  }
}

TEST_CASE_METHOD(
    instance_fixture,
    "an exception inside a rank actor fails its rooms everywhere - the rank carries on",
    "[actors][agreement]") {
  // Decode rank 1 throws while it sends its first room's requests.
  decode_faults[1] = std::make_shared<faulty_transport::plan>();
  decode_faults[1]->throw_at_fence[0] = "injected fault in open_fence";
  start(2, 1, 2, 1);
  auto h = open_room(80, {1, 2}, {3, 4}, 1, 1, 1);
  sched.run();
  std::optional<failure> first;
  auto check = [&](kv_poll state, std::optional<transfer_error> e) {
    CAPTURE(e ? to_string(e->why) : std::string{"-"});
    REQUIRE(state == kv_poll::failed);
    if (!first)
      first = e->why;
    CHECK(e->why == *first);
  };
  for (auto& s : h.senders)
    check(s.poll(), s.failure());
  for (auto& r : h.receivers)
    check(r.poll(), r.failure());
  CHECK(first->code == errc::internal);
  CHECK(first->cause == "exception in decode-0 tp1 pp0: injected fault in open_fence");
  CHECK(first->origin.tp == 1u);
  // Still alive: the next room moves every byte.
  auto next = open_room(81, {5, 6}, {7, 8}, 2, 2, 1);
  sched.run();
  for (auto& s : next.senders)
    CHECK(s.poll() == kv_poll::success);
  for (size_t k = 0; k < decode.size(); ++k) {
    CHECK(next.receivers[k].poll() == kv_poll::success);
    CHECK(decode[k].pool->holds_room(seed, 81, {7, 8}, 2));
  }
}
