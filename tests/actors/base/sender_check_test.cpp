// Every sender check docs/SECURITY.md §2.2 lists, one stranger's message each
// (issue 29): a stranger (an actor that is no rank of the room, no decider of
// it) sends the message that, were it taken, would change the room: it is
// dropped, counted, and the room goes on to the outcome the real protocol
// gives it. Each check was removed by hand once and its case turned red
// (the pairs are in the case names' comments). Deterministic (CAF's test
// coordinator), TP 2 -> 2.
#include "tests/support/instance_fixture.hpp"

#include <caf/send.hpp>

#include "actors/decision/decider_actor.hpp"
#include "actors/rank/decode_rank.hpp"
#include "actors/rank/prefill_rank.hpp"

using namespace kvferry;
using namespace kvferry::test;

namespace {

struct sender_fixture : instance_fixture {
  caf::actor stranger;

  sender_fixture() {
    start(2, 1, 2, 1);
    stranger = sys.spawn([](caf::event_based_actor* self) -> caf::behavior {
      self->set_default_handler(caf::drop);
      return {[](int) {}};
    });
  }
  ~sender_fixture() { caf::anon_send_exit(stranger, caf::exit_reason::kill); }

  /// Page and aux row every room of these cases uses on both sides (one
  /// room at a time).
  static constexpr uint32_t page = 1, row = 1;

  /// Opens room `id` on every decode rank and on every prefill rank, without
  /// sending its pages: it is keyed and waits for its chunks.
  room_handles waiting_room(uint64_t id) {
    room_handles h;
    for (auto& r : decode) {
      h.receivers.push_back(r.rt->make_receiver(id, where()));
      h.receivers.back().init({page}, row);
    }
    for (auto& r : prefill) {
      r.pool->fill_room(seed, id, {page}, row);
      h.senders.push_back(r.rt->make_sender(id));
      h.senders.back().init(1, row);
    }
    sched.run();
    for (auto& rcv : h.receivers)
      REQUIRE_FALSE(is_terminal(rcv.poll()));
    return h;
  }

  /// Sends the waiting room's pages: the real protocol's end.
  void finish(room_handles& h) {
    for (auto& s : h.senders)
      s.send({page}, true);
    sched.run();
  }

  decision_book::room* record(uint64_t id) {
    return state_of<decider_state>(dec).book.find(room_key{id, 0});
  }

  size_t decider_drops() { return state_of<decider_state>(dec).strangers.dropped(); }

  /// The key the decider gave room `id` (it must hold the room).
  room_key key_of(uint64_t id) {
    auto* r = record(id);
    REQUIRE(r);
    return r->key;
  }

  /// A cause a stranger makes up.
  static failure forged() {
    return failure{errc::internal, "forged", instance_ref(role::decode, "x", 0)};
  }

  static bool all(const std::vector<receiver>& rs, kv_poll s) {
    return std::all_of(rs.begin(), rs.end(), [&](auto& r) { return r.poll() == s; });
  }
  static bool all(const std::vector<sender>& ss, kv_poll s) {
    return std::all_of(ss.begin(), ss.end(), [&](auto& r) { return r.poll() == s; });
  }
};

// decider: on_join's from_member check
TEST_CASE_METHOD(sender_fixture, "the decider drops a stranger's join naming a member",
                 "[actors][security]") {
  auto before = decider_drops();
  caf::send_as(stranger, dec, room_join{99, state_of<decider_state>(dec).book.member(0, 0), {}});
  sched.run();
  CHECK(record(99) == nullptr);  // no room opened for it
  CHECK(decider_drops() == before + 1);
  // The instance serves as before.
  auto h = open_room(5, {1}, {2}, 1, 1, 0);
  sched.run();
  CHECK(all(h.receivers, kv_poll::success));
}

// decider: on_finished's from_participant check
TEST_CASE_METHOD(sender_fixture,
                 "the decider drops a stranger's finishes: a room is not decided by them",
                 "[actors][security]") {
  auto h = waiting_room(7);
  auto* r = record(7);
  REQUIRE(r);
  auto key = r->key;
  auto before = decider_drops();
  // Every participant's finish, forged: taken, they would decide Success
  // before a byte landed.
  for (auto& p : r->decision.participants())
    caf::send_as(stranger, dec, room_finished{key, p});
  sched.run();
  REQUIRE(record(7));
  CHECK_FALSE(record(7)->decision.decided());
  CHECK(decider_drops() > before);
  for (auto& rcv : h.receivers)
    CHECK_FALSE(is_terminal(rcv.poll()));
  finish(h);
  CHECK(all(h.receivers, kv_poll::success));
  CHECK(all(h.senders, kv_poll::success));
}

// decider: on_failure's from_participant check
TEST_CASE_METHOD(sender_fixture, "the decider drops a stranger's failure of a live room",
                 "[actors][security]") {
  auto h = waiting_room(8);
  auto key = key_of(8);
  auto before = decider_drops();
  caf::send_as(stranger, dec, room_failure{key, forged()});
  sched.run();
  REQUIRE(record(8));
  CHECK_FALSE(record(8)->decision.decided());
  // With the room's exact key it may be a prefill rank whose join has not
  // come in yet: held (at most 256), taken only once a join names the sender.
  CHECK(state_of<decider_state>(dec).held_failures.size() == 1u);
  CHECK(decider_drops() == before);
  finish(h);
  CHECK(all(h.receivers, kv_poll::success));
}

// decider: on_failure's from_participant check, without the room's key
TEST_CASE_METHOD(sender_fixture, "the decider drops a stranger's failure without the room's key",
                 "[actors][security]") {
  auto h = waiting_room(13);
  key_of(13);
  auto before = decider_drops();
  caf::send_as(stranger, dec, room_failure{room_key{13, 0}, forged()});
  sched.run();
  REQUIRE(record(13));
  CHECK_FALSE(record(13)->decision.decided());
  CHECK(decider_drops() == before + 1);
  finish(h);
  CHECK(all(h.receivers, kv_poll::success));
}

// decider: on_leave's from_member check
TEST_CASE_METHOD(sender_fixture, "the decider drops a stranger's leave naming a member",
                 "[actors][security]") {
  auto h = waiting_room(9);
  auto key = key_of(9);
  auto member = state_of<decider_state>(dec).book.member(1, 0);
  auto before = decider_drops();
  caf::send_as(stranger, dec, room_leave{key, member});
  sched.run();
  REQUIRE(record(9));
  CHECK(record(9)->joined.count(member) == 1);  // still a member of the room
  CHECK(decider_drops() == before + 1);
  finish(h);
  CHECK(all(h.receivers, kv_poll::success));
}

// decode rank: on_verdict's check of the sender (its instance's decider)
TEST_CASE_METHOD(sender_fixture, "a decode rank drops a verdict that is not its decider's",
                 "[actors][security]") {
  auto h = waiting_room(10);
  auto key = key_of(10);
  auto target = decode[0].rt->decode();
  auto before = state_of<decode_rank_state>(target).strangers.dropped();
  caf::send_as(stranger, target, room_verdict{key, kv_poll::failed, forged()});
  caf::send_as(stranger, target, room_verdict{key, kv_poll::success, failure{}});
  sched.run();
  CHECK_FALSE(is_terminal(h.receivers[0].poll()));
  CHECK(state_of<decode_rank_state>(target).strangers.dropped() == before + 2);
  finish(h);
  CHECK(all(h.receivers, kv_poll::success));
}

// prefill rank: on_verdict's check of the sender (the room's decider once bound)
TEST_CASE_METHOD(sender_fixture, "a prefill rank drops a verdict that is not its room's decider's",
                 "[actors][security]") {
  auto h = waiting_room(11);
  auto key = key_of(11);
  auto target = prefill[0].rt->prefill();
  caf::send_as(stranger, target, room_verdict{key, kv_poll::success, failure{}});
  sched.run();
  // Taken, the room would read Success with nothing sent.
  CHECK_FALSE(is_terminal(h.senders[0].poll()));
  finish(h);
  CHECK(all(h.senders, kv_poll::success));
  CHECK(all(h.receivers, kv_poll::success));
}

// prefill rank: on_sibling_concluded's check (a rank of its own instance)
TEST_CASE_METHOD(sender_fixture, "a prefill rank drops a conclusion that is not a sibling's",
                 "[actors][security]") {
  // A prefill room no decode rank asked for yet: no decider, so a sibling's
  // word would conclude it.
  prefill[0].pool->fill_room(seed, 12, {page}, row);
  auto s = prefill[0].rt->make_sender(12);
  s.init(1, row);
  sched.run();
  caf::send_as(stranger, prefill[0].rt->prefill(),
               sibling_concluded{12, failure{errc::internal, "forged",
                                             instance_ref(role::prefill, "prefill-0", 0)}});
  sched.run();
  CHECK_FALSE(is_terminal(s.poll()));
  // The room goes on when decode asks for it.
  std::vector<sender> senders;
  senders.push_back(std::move(s));
  prefill[1].pool->fill_room(seed, 12, {page}, row);
  senders.push_back(prefill[1].rt->make_sender(12));
  senders.back().init(1, row);
  room_handles h{std::move(senders), {}};
  for (auto& r : decode) {
    h.receivers.push_back(r.rt->make_receiver(12, where()));
    h.receivers.back().init({page}, row);
  }
  sched.run();
  finish(h);
  CHECK(all(h.receivers, kv_poll::success));
}

}  // namespace
