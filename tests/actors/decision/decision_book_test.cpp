// The decider's record of rooms, by direct calls: generations drawn once per
// room, members named by place, success only when everyone finished, rooms
// forgotten once every live member released them, and tombstones that give
// a late member the verdict it missed (newest first, bounded).
#include <catch2/catch.hpp>

#include <chrono>
#include <set>

#include "actors/decision/decision_book.hpp"

using namespace kvferry;
using namespace std::chrono_literals;

namespace {

const rank_ref p0{role::prefill, "p", 3, 0, 0};
const rank_ref p1{role::prefill, "p", 3, 1, 0};
const rank_ref self_rank{role::decode, "d", 9, rank_ref::whole, rank_ref::whole};

/// A decider of instance "d" (generation 9) with tp 2, pp 1; room
/// generations from 100.
decision_book book2() {
  return decision_book{"d", 9, 2, 1, 100};
}

failure boom() {
  return failure{errc::transfer_failed, "boom", p0};
}

}  // namespace

TEST_CASE("decision_book draws a generation per room, once", "[logic][decision]") {
  auto book = book2();
  auto& a = book.join(7, book.member(0, 0), {p0});
  CHECK(a.key == room_key{7, 100});
  auto& again = book.join(7, book.member(1, 0), {});
  CHECK(again.key == room_key{7, 100});  // a second member joins the same room
  CHECK(book.join(8, book.member(0, 0), {}).key == room_key{8, 101});
  CHECK(book.size() == 2);
  CHECK(book.ids() == std::vector<uint64_t>{7, 8});
  // Generation 0 seeds from 1: a room key is never "unbound".
  decision_book zero{"d", 1, 1, 1, 0};
  CHECK(zero.join(1, zero.member(0, 0), {}).key.generation == 1);
}

TEST_CASE("decision_book finds a room by id and generation", "[logic][decision]") {
  auto book = book2();
  book.join(7, book.member(0, 0), {});
  CHECK(book.find({7, 100}));
  CHECK(book.find({7, 0}));          // any generation
  CHECK_FALSE(book.find({7, 99}));   // a stale generation
  CHECK_FALSE(book.find({8, 100}));  // no such room
}

TEST_CASE("decision_book makes every decode member and each prefill rank a participant",
          "[logic][decision]") {
  auto book = book2();
  auto& r = book.join(7, book.member(0, 0), {p0});
  book.join(7, book.member(1, 0), {p0, p1});  // p0 again counts once
  CHECK(r.decision.participants().size() == 4);
  CHECK(r.prefill == std::set<rank_ref>{p0, p1});
  // Success only when all four finished; a repeat counts once.
  CHECK_FALSE(book.finish(r, book.member(0, 0)));
  CHECK_FALSE(book.finish(r, book.member(0, 0)));
  CHECK_FALSE(book.finish(r, p0));
  CHECK_FALSE(book.finish(r, p1));
  // A decode rank is named by place: another generation of it is the same member.
  auto v = book.finish(r, rank_ref{role::decode, "d", 4, 1, 0});
  REQUIRE(v);
  CHECK(v->outcome == kv_poll::success);
  CHECK(book.undecided().empty());
  // Once decided, a new prefill rank is recorded but waited for by nobody.
  book.join(7, book.member(0, 0), {rank_ref{role::prefill, "p", 3, 2, 0}});
  CHECK(r.decision.participants().size() == 4);
  CHECK_FALSE(book.fail(r, boom()));  // decided once
}

TEST_CASE("decision_book decides on the first failure", "[logic][decision]") {
  auto book = book2();
  auto& r = book.join(7, book.member(0, 0), {p0});
  auto v = book.fail(r, boom());
  REQUIRE(v);
  CHECK(v->outcome == kv_poll::failed);
  CHECK(v->why.cause == "boom");
  CHECK_FALSE(book.fail(r, failure{errc::deadline, "later", p1}));
  CHECK_FALSE(book.finish(r, book.member(0, 0)));
  CHECK(r.decision.outcome()->why.cause == "boom");
}

TEST_CASE("decision_book opens a room at its first join", "[logic][decision]") {
  auto book = book2();
  std::chrono::steady_clock::time_point t0{std::chrono::seconds{50}};
  auto& r = book.join(7, book.member(0, 0), {}, t0);
  CHECK(r.opened == t0);
  book.join(7, book.member(1, 0), {}, t0 + 9s);
  CHECK(r.opened == t0);  // a later join does not move it
  CHECK(r.joined.size() == 2);
}

TEST_CASE("decision_book tells which rooms a member is in, and which are undecided",
          "[logic][decision]") {
  auto book = book2();
  book.join(7, book.member(0, 0), {});
  book.join(8, book.member(1, 0), {});
  auto& r9 = book.join(9, book.member(0, 0), {});
  book.fail(r9, boom());
  CHECK(book.rooms_of(book.member(0, 0)) == std::vector<room_key>{{7, 100}, {9, 102}});
  CHECK(book.rooms_of(rank_ref{role::decode, "d", 1, 1, 0}) == std::vector<room_key>{{8, 101}});
  CHECK(book.undecided() == std::vector<room_key>{{7, 100}, {8, 101}});
}

TEST_CASE("decision_book forgets a room once every live member released it", "[logic][decision]") {
  auto book = book2();
  std::set<rank_ref> members{book.member(0, 0), book.member(1, 0)};
  auto& r = book.join(7, book.member(0, 0), {});
  book.join(7, book.member(1, 0), {});
  book.fail(r, boom());
  CHECK_FALSE(book.leave({7, 100}, book.member(0, 0), members));
  CHECK(book.rooms_of(book.member(0, 0)).empty());
  CHECK_FALSE(book.leave({7, 99}, book.member(1, 0), members));  // a stale generation: no
  CHECK(book.find({7, 100}));
  CHECK(book.leave({7, 100}, book.member(1, 0), members));
  CHECK_FALSE(book.find({7, 0}));
  CHECK(book.tombstones() == 1);
  // A member that is gone is not waited for.
  book.join(8, book.member(0, 0), {});
  CHECK(book.leave({8, 101}, book.member(0, 0), {book.member(0, 0)}));
  CHECK(book.tombstones() == 1);                 // undecided: forgotten without a tombstone
  CHECK_FALSE(book.forget_if_done(8, members));  // not on record
}

TEST_CASE("decision_book keeps one expiry per decided room, forgotten with the room",
          "[logic][decision]") {
  auto book = book2();
  std::set<rank_ref> members{book.member(0, 0), book.member(1, 0)};
  const decision_book::time_point t0{};
  auto& r = book.join(7, book.member(0, 0), {});
  book.join(7, book.member(1, 0), {});
  book.fail(r, boom());
  CHECK(book.arm_expiry(r.key, t0 + 30s) == t0 + 30s);
  auto& s = book.join(8, book.member(0, 0), {});
  book.fail(s, boom());
  CHECK_FALSE(book.arm_expiry(s.key, t0 + 31s));  // the timer goes off first
  CHECK(book.expiries() == 2);
  // Room 7 is released by every member: its expiry goes with it.
  book.leave({7, 100}, book.member(0, 0), members);
  CHECK(book.leave({7, 100}, book.member(1, 0), members));
  CHECK(book.expiries() == 1);
  auto fired = book.expiries_due(t0 + 30s);
  CHECK(fired.due_now.empty());
  CHECK(fired.set_timer == t0 + 31s);
  fired = book.expiries_due(t0 + 31s);
  REQUIRE(fired.due_now.size() == 1);
  CHECK(fired.due_now[0].room == 8);
  CHECK(fired.due_now[0].tag == 101);  // its generation
}

TEST_CASE("decision_book counts the rooms that name each prefill rank, without a walk",
          "[logic][decision]") {
  auto book = book2();
  std::set<rank_ref> members{book.member(0, 0), book.member(1, 0)};
  auto& a = book.join(7, book.member(0, 0), {p0});
  book.join(7, book.member(1, 0), {p0, p1});  // p0 again: still one room
  book.join(8, book.member(0, 0), {p0});
  CHECK(book.rooms_naming(p0) == 2);
  CHECK(book.rooms_naming(p1) == 1);
  book.fail(a, boom());
  book.leave(a.key, book.member(0, 0), members);
  CHECK(book.leave({7, 100}, book.member(1, 0), members));  // room 7 forgotten
  CHECK(book.rooms_naming(p0) == 1);
  CHECK(book.rooms_naming(p1) == 0);
  CHECK(book.leave({8, 101}, book.member(0, 0), {book.member(0, 0)}));
  CHECK(book.rooms_naming(p0) == 0);
}

TEST_CASE("decision_book stops waiting for members that never joined once excused",
          "[logic][decision]") {
  auto book = book2();
  std::set<rank_ref> members{book.member(0, 0), book.member(1, 0)};
  auto& r = book.join(7, book.member(0, 0), {});
  book.fail(r, boom());
  CHECK_FALSE(book.leave({7, 100}, book.member(0, 0), members));  // member 1 may still join
  book.excuse_late({7, 99});                                      // a stale key: nothing
  CHECK_FALSE(book.forget_if_done(7, members));
  book.excuse_late({7, 100});
  CHECK(book.forget_if_done(7, members));
  // A member that joined and did not leave is still waited for, excused or not.
  auto& s = book.join(8, book.member(0, 0), {});
  book.join(8, book.member(1, 0), {});
  book.fail(s, boom());
  book.excuse_late({8, 101});
  CHECK_FALSE(book.leave({8, 101}, book.member(0, 0), members));
}

TEST_CASE("decision_book gives the verdict to a member that joins a forgotten room late",
          "[logic][decision]") {
  auto book = book2();
  std::set<rank_ref> members{book.member(0, 0), book.member(1, 0)};
  auto& r = book.join(7, book.member(0, 0), {});
  book.fail(r, boom());
  book.excuse_late({7, 100});
  REQUIRE(book.leave({7, 100}, book.member(0, 0), members));
  // Member 1 never took part: it gets the verdict, on every join it sends.
  for (int i = 0; i < 2; ++i) {
    auto* t = book.late_join(7, rank_ref{role::decode, "d", 2, 1, 0});
    REQUIRE(t);
    CHECK(t->key == room_key{7, 100});
    CHECK(t->outcome.outcome == kv_poll::failed);
    CHECK(t->outcome.why.cause == "boom");
  }
  // Member 0 took part: a join of id 7 from it is a new room.
  CHECK_FALSE(book.late_join(7, book.member(0, 0)));
  CHECK_FALSE(book.late_join(8, book.member(1, 0)));  // no tombstone for that id

  // The id is reused and forgotten again, this time with member 1 in it: the
  // newest tombstone speaks.
  auto& again = book.join(7, book.member(1, 0), {});
  CHECK(again.key == room_key{7, 101});
  book.fail(again, boom());
  book.excuse_late({7, 101});
  REQUIRE(book.leave({7, 101}, book.member(1, 0), members));
  CHECK_FALSE(book.late_join(7, book.member(1, 0)));
  auto* t = book.late_join(7, book.member(0, 0));
  REQUIRE(t);
  CHECK(t->key == room_key{7, 101});
}

TEST_CASE("decision_book keeps a bounded number of tombstones, dropping the oldest",
          "[logic][decision]") {
  decision_book book{"d", 9, 1, 1, 1};
  std::set<rank_ref> members{book.member(0, 0)};
  const uint64_t rooms = 16385;
  for (uint64_t id = 1; id <= rooms; ++id) {
    auto& r = book.join(id, book.member(0, 0), {});
    auto key = r.key;
    book.finish(r, book.member(0, 0));
    REQUIRE(book.leave(key, book.member(0, 0), members));
  }
  CHECK(book.tombstones() == 16384);
  auto other = rank_ref{role::decode, "d", 9, 1, 0};  // took part in none
  CHECK_FALSE(book.late_join(1, other));              // the oldest went
  auto* t = book.late_join(2, other);
  REQUIRE(t);
  CHECK(t->outcome.outcome == kv_poll::success);
  CHECK(book.late_join(rooms, other));
}

TEST_CASE("decision_book counts its undecided rooms as they come, are decided and go",
          "[logic][decision]") {
  auto book = book2();
  auto& a = book.join(7, book.member(0, 0), {p0});
  book.join(8, book.member(0, 0), {});
  book.join(7, book.member(1, 0), {});  // a second join: no new room
  CHECK(book.undecided_count() == 2u);
  CHECK(book.fail(a, boom()));
  CHECK_FALSE(book.fail(a, boom()));  // decided once
  CHECK(book.undecided_count() == 1u);
  // Room 8 forgotten undecided (every member left it).
  book.leave({8, 101}, book.member(0, 0), {book.member(0, 0), book.member(1, 0)});
  CHECK(book.leave({8, 101}, book.member(1, 0), {book.member(0, 0), book.member(1, 0)}));
  CHECK(book.undecided_count() == 0u);
}

TEST_CASE("decision_book knows a room it decided and forgot, by its exact key",
          "[logic][decision]") {
  auto book = book2();
  auto& a = book.join(7, book.member(0, 0), {});
  book.join(7, book.member(1, 0), {});
  REQUIRE(book.fail(a, boom()));
  auto members = std::set<rank_ref>{book.member(0, 0), book.member(1, 0)};
  book.leave({7, 100}, book.member(0, 0), members);
  REQUIRE(book.leave({7, 100}, book.member(1, 0), members));
  CHECK(book.decided_before({7, 100}));
  CHECK_FALSE(book.decided_before({7, 0}));    // a key without its generation proves nothing
  CHECK_FALSE(book.decided_before({7, 99}));   // another incarnation of the id
  CHECK_FALSE(book.decided_before({8, 100}));  // never on record
}
