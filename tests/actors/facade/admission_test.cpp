// Admission (issue 28): a decode instance's decider holds at most
// deadlines::max_rooms undecided rooms; the first join of one more is keyed
// and refused at once, on every rank of both instances alike, with
// `overloaded` and the limit in the cause - load is refused, never mistaken
// for a death. The rooms already admitted go on, and once they are decided
// new rooms are admitted again. Deterministic (CAF's test coordinator).
#include "tests/support/instance_fixture.hpp"

#include "actors/decision/decider_actor.hpp"

using namespace kvferry;
using namespace kvferry::test;

TEST_CASE_METHOD(instance_fixture,
                 "a decider at its limit refuses one more room at once, alike on every rank, and "
                 "admits again once rooms are decided",
                 "[actors][admission]") {
  limits.max_rooms = 2;
  start(2, 1, 2, 1);
  // Two rooms admitted and waiting for their prefill chunks (not sent yet).
  std::vector<room_handles> held;
  for (uint64_t id : {1u, 2u}) {
    room_handles h;
    for (auto& r : decode) {
      h.receivers.push_back(r.rt->make_receiver(id, where()));
      h.receivers.back().init({static_cast<uint32_t>(id)}, static_cast<uint32_t>(id));
    }
    for (auto& r : prefill) {
      r.pool->fill_room(seed, id, {static_cast<uint32_t>(id)}, static_cast<uint32_t>(id));
      h.senders.push_back(r.rt->make_sender(id));
      h.senders.back().init(1, static_cast<uint32_t>(id));
    }
    held.push_back(std::move(h));
  }
  sched.run();
  CHECK(state_of<decider_state>(dec).book.undecided_count() == 2u);

  // A third room: refused at once on every rank of both instances.
  auto third = open_room(3, {5}, {6}, 3, 3, 0);
  sched.run();  // no virtual time passes
  auto why = one_failure(third.receivers);
  CHECK(one_failure(third.senders) == why);
  CHECK(why.code == errc::overloaded);
  CHECK_THAT(why.cause, Catch::StartsWith("the decider of decode-0 holds 2 undecided rooms, its "
                                          "limit (kvferry.max-rooms): room 3#"));
  CHECK(why.origin == instance_ref(role::decode, "decode-0", 0));
  // The admitted rooms go on: their chunks come, they succeed.
  for (uint32_t k = 0; k < held.size(); ++k)
    for (auto& s : held[k].senders)
      s.send({k + 1}, true);  // room k + 1's one page
  sched.run();
  for (auto& h : held) {
    for (auto& r : h.receivers)
      CHECK(r.poll() == kv_poll::success);
    h.receivers.clear();
    h.senders.clear();
  }
  sched.run();
  // Decided: room 4 is admitted.
  auto next = open_room(4, {7}, {8}, 4, 4, 0);
  sched.run();
  for (size_t k = 0; k < decode.size(); ++k) {
    CHECK(next.receivers[k].poll() == kv_poll::success);
    CHECK(decode[k].pool->holds_room(seed, 4, {8}, 4));
  }
}
