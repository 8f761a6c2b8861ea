// The plain parts of the rank actors: a prefill rank's early arrivals
// (requests and verdicts before the open, outcomes of cleared rooms), a decode
// rank's record of a prefill instance (its handshake and its going down), a
// decode room's sequencing (join, key, requests), and
// the drains of concluded rooms whose fences are not quiet yet.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "actors/rank/decode_room.hpp"
#include "actors/rank/early_arrivals.hpp"
#include "actors/rank/fence_drains.hpp"
#include "actors/rank/prefill_peer.hpp"

using namespace kvferry;
using namespace std::chrono_literals;

namespace {

rank_ref prefill_me{role::prefill, "p", 1, 0, 0};
rank_ref decode_rank{role::decode, "d", 2, 0, 0};

room_request request(uint64_t room, uint64_t generation, uint32_t tp = 0) {
  auto from = decode_rank;
  from.tp = tp;
  return room_request{room_key{room, generation}, from, {}, {1, 2}, no_aux_slot, {}, false};
}

room_verdict failed(uint64_t room, uint64_t generation, std::string cause) {
  return room_verdict{room_key{room, generation}, kv_poll::failed,
                      failure{errc::peer_down, std::move(cause), decode_rank}};
}

kv_layout layout(uint32_t tp, uint32_t tp_size, uint32_t page_size = 4) {
  kv_layout l;
  l.page_size = page_size;
  l.dtype = kv_dtype::bf16;
  l.layer_ids = {0};
  l.total_kv_heads = 8;
  l.kv_heads = 8 / tp_size;
  l.head_dim = 16;
  l.tp_rank = tp;
  l.tp_size = tp_size;
  l.pp_rank = 0;
  l.pp_size = 1;
  auto item = uint64_t{page_size} * l.kv_heads * 16 * 2;
  l.kv_buffers = {{1, 0, item * 8, item}, {2, 0, item * 8, item}};
  return l;
}

topology prefill_topology(uint32_t tp_size, uint32_t page_size = 4) {
  topology t;
  t.instance = "p";
  t.instance_generation = 1;
  t.tp_size = tp_size;
  t.pp_size = 1;
  for (uint32_t tp = 0; tp < tp_size; ++tp) {
    rank_registration r;
    r.rank = rank_ref{role::prefill, "p", 1, tp, 0};
    r.data_endpoint = "10.0.0.1:" + std::to_string(7000 + tp);
    r.layout = layout(tp, tp_size, page_size);
    r.tp_size = tp_size;
    t.ranks.push_back(r);
  }
  return t;
}

/// A handshake of decode rank `me` (its layout `mine`) with a prefill
/// instance of TP 2 read again: every source accepts it and the decider
/// reached them.
void handshake_again(prefill_peer& peer, const rank_ref& me, const kv_layout& mine) {
  peer.read(prefill_topology(2), me, mine, {2, 1});
  peer.in_flight = true;
  for (auto& s : peer.sources)
    peer.accept(s.rank, false);
  peer.decider_reached = true;
  REQUIRE(peer.handshake_done());
}

}  // namespace

TEST_CASE("early arrivals: requests wait for the open, in order, one expiry per room",
          "[logic][rank]") {
  early_arrivals early;
  CHECK(early.keep_request(request(7, 3, 0)) == early_arrivals::kept::first);
  CHECK(early.keep_request(request(7, 3, 1)) == early_arrivals::kept::another);
  CHECK(early.waiting_rooms() == 1);
  auto entry = early.take(7);
  REQUIRE(entry);
  REQUIRE(entry->requests.size() == 2);
  CHECK(entry->requests[0].decode_rank.tp == 0);
  CHECK(entry->requests[1].decode_rank.tp == 1);
  CHECK(entry->request.decode_rank.tp == 1);
  CHECK_FALSE(entry->verdict);
  CHECK_FALSE(early.take(7));
  CHECK(early.waiting_rooms() == 0);
}

TEST_CASE("early arrivals: a newer generation replaces what waited for the room", "[logic][rank]") {
  early_arrivals early;
  early.keep_request(request(7, 3));
  CHECK(early.keep_request(request(7, 4)) == early_arrivals::kept::first);
  auto entry = early.take(7);
  REQUIRE(entry);
  REQUIRE(entry->requests.size() == 1);
  CHECK(entry->request.key.generation == 4);
  // An expiry of the replaced generation finds nothing.
  early.keep_request(request(8, 4));
  CHECK_FALSE(early.expire(8, 3, 10s, prefill_me));
}

TEST_CASE("early arrivals: the bound on waiting rooms refuses newcomers, not the waiting",
          "[logic][rank]") {
  early_arrivals early{2, 4};
  CHECK(early.keep_request(request(1, 1)) == early_arrivals::kept::first);
  CHECK(early.keep_request(request(2, 1)) == early_arrivals::kept::first);
  CHECK(early.keep_request(request(3, 1)) == early_arrivals::kept::full);
  CHECK(early.keep_request(request(2, 1, 1)) == early_arrivals::kept::another);
  CHECK_FALSE(early.keep_verdict(failed(4, 1, "x"), decider_actor{}));
  CHECK(early.waiting_rooms() == 2);
}

TEST_CASE("early arrivals: a room keeps one request per decode rank, and at most its bound",
          "[logic][rank][security]") {
  early_arrivals early{8, 4, 3};
  CHECK(early.keep_request(request(5, 1, 0)) == early_arrivals::kept::first);
  // The same rank asking again (a stranger repeating it, say) replaces its
  // request: the room's list does not grow.
  for (int i = 0; i < 100; ++i)
    CHECK(early.keep_request(request(5, 1, 0)) == early_arrivals::kept::another);
  CHECK(early.keep_request(request(5, 1, 1)) == early_arrivals::kept::another);
  CHECK(early.keep_request(request(5, 1, 2)) == early_arrivals::kept::another);
  CHECK(early.keep_request(request(5, 1, 3)) == early_arrivals::kept::crowded);
  auto entry = early.take(5);
  REQUIRE(entry);
  CHECK(entry->requests.size() == 3);
  CHECK(early.max_requests_per_room() == 3);
  CHECK(early_arrivals{}.max_requests_per_room() == 4096);
}

TEST_CASE("early arrivals: a verdict before the open is kept, and requests after it are not",
          "[logic][rank]") {
  early_arrivals early;
  CHECK(early.keep_verdict(failed(9, 5, "lost"), decider_actor{}));
  CHECK(early.keep_request(request(9, 5)) == early_arrivals::kept::decided);
  // A verdict of another generation than the one waiting is not taken.
  early.keep_request(request(10, 5));
  CHECK_FALSE(early.keep_verdict(failed(10, 6, "other"), decider_actor{}));
  auto entry = early.take(9);
  REQUIRE(entry);
  REQUIRE(entry->verdict);
  CHECK(entry->verdict->why.cause == "lost");
  CHECK(entry->requests.empty());
  auto other = early.take(10);
  REQUIRE(other);
  CHECK_FALSE(other->verdict);
}

TEST_CASE("early arrivals: expiry fails a room never opened, then forgets it", "[logic][rank]") {
  early_arrivals early;
  early.keep_request(request(11, 2));
  auto first = early.expire(11, 2, 30s, prefill_me);
  REQUIRE(first);
  CHECK(first->failed);
  CHECK(first->request.key == room_key{11, 2});
  CHECK(first->verdict.outcome == kv_poll::failed);
  CHECK(first->verdict.why.code == errc::deadline);
  CHECK(first->verdict.why.origin == prefill_me);
  CHECK_THAT(first->verdict.why.cause,
             Catch::Contains("was requested but not opened by the prefill scheduler within"));
  // Kept as decided: a request now is not needed, a late open concludes the same.
  CHECK(early.keep_request(request(11, 2, 1)) == early_arrivals::kept::decided);
  auto second = early.expire(11, 2, 30s, prefill_me);
  REQUIRE(second);
  CHECK_FALSE(second->failed);
  CHECK(second->verdict == first->verdict);
  CHECK(early.waiting_rooms() == 0);
  CHECK_FALSE(early.expire(11, 2, 30s, prefill_me));
}

TEST_CASE("early arrivals: one expiry per room waiting, gone when the room opens",
          "[logic][rank]") {
  early_arrivals early;
  const early_arrivals::time_point t0{};
  CHECK(early.arm_expiry(7, 3, t0 + 30s) == t0 + 30s);  // the timer is set for it
  CHECK(early.expiry_armed(7));
  CHECK_FALSE(early.arm_expiry(8, 5, t0 + 40s));  // the timer goes off before it
  CHECK(early.expiries() == 2);
  early.keep_request(request(7, 3));
  early.take(7);  // opened: its expiry goes with what waited
  CHECK_FALSE(early.expiry_armed(7));
  CHECK(early.expiries() == 1);
  // The timer set for room 7 brings nothing, and is set again for room 8.
  auto none = early.expiries_due(t0 + 30s);
  CHECK(none.due_now.empty());
  CHECK(none.set_timer == t0 + 40s);
  auto due = early.expiries_due(t0 + 40s);
  REQUIRE(due.due_now.size() == 1);
  CHECK(due.due_now[0].room == 8);
  CHECK(due.due_now[0].tag == 5);  // the generation, for expire()
  CHECK(early.expiries() == 0);
}

TEST_CASE("early arrivals: cleared rooms are remembered, newest first, within a bound",
          "[logic][rank]") {
  early_arrivals early{16, 3};
  early.bury(1, failed(1, 1, "first"));
  early.bury(1, failed(1, 2, "second"));
  REQUIRE(early.cleared(1));
  CHECK(early.cleared(1)->why.cause == "second");
  REQUIRE(early.cleared_as(room_key{1, 1}));
  CHECK(early.cleared_as(room_key{1, 1})->why.cause == "first");
  CHECK_FALSE(early.cleared_as(room_key{1, 0}));  // generation 0: no room is bound to it
  early.bury(2, failed(2, 1, "b"));
  early.bury(3, failed(3, 1, "c"));
  CHECK(early.cleared_rooms() == 3);
  CHECK_FALSE(early.cleared_as(room_key{1, 1}));  // the oldest went
  CHECK(early.cleared(1));
  CHECK_FALSE(early.cleared(4));
}

TEST_CASE("cleared outcome: a concluded room keeps its own, a live one was aborted",
          "[logic][rank]") {
  failure why{errc::peer_down, "gone", decode_rank};
  auto done = cleared_outcome(room_key{1, 2}, kv_poll::failed, why, prefill_me);
  CHECK(done == room_verdict{room_key{1, 2}, kv_poll::failed, why});
  auto ok = cleared_outcome(room_key{1, 2}, kv_poll::success, failure{}, prefill_me);
  CHECK(ok.outcome == kv_poll::success);
  auto live = cleared_outcome(room_key{1, 2}, kv_poll::transferring, failure{}, prefill_me);
  CHECK(live.outcome == kv_poll::failed);
  CHECK(live.why.code == errc::aborted);
  CHECK(live.why.origin == prefill_me);
  CHECK_THAT(live.why.cause,
             Catch::EndsWith("was cleared by the prefill scheduler in Transferring"));
}

TEST_CASE("prefill peer: a topology starts a handshake with this rank's sources", "[logic][rank]") {
  prefill_peer peer;
  rank_ref me{role::decode, "d", 2, 1, 0};
  auto plan = peer.read(prefill_topology(2), me, layout(1, 2), {2, 1});
  REQUIRE(plan.what == prefill_peer::reading::action::handshake);
  CHECK(peer.instance == "p");
  CHECK(peer.everyone.size() == 2);
  REQUIRE(plan.sources.size() == 1);
  CHECK(plan.sources[0].rank.tp == 1);
  REQUIRE(peer.sources.size() == 1);
  CHECK(peer.sources[0].endpoint == "10.0.0.1:7001");
  CHECK(peer.current(plan.round));
  CHECK_FALSE(peer.handshake_done());  // nothing under way yet
  peer.in_flight = true;
  peer.accept(plan.sources[0].rank, true);
  CHECK(peer.sources[0].staged);
  CHECK_FALSE(peer.handshake_done());  // the decider has not reached the ranks
  peer.decider_reached = true;
  CHECK(peer.handshake_done());
  CHECK_FALSE(peer.come_up());
  CHECK(peer.phase == prefill_peer::stage::ready);
  CHECK_FALSE(peer.in_flight);
  // A second topology voids the first round's callbacks.
  auto again = peer.read(prefill_topology(2), me, layout(1, 2), {2, 1});
  CHECK_FALSE(peer.current(plan.round));
  CHECK(peer.current(again.round));
  CHECK(peer.accepted.empty());
}

TEST_CASE("prefill peer: sizes and layouts that cannot pair are refusals", "[logic][rank]") {
  rank_ref me{role::decode, "d", 2, 0, 0};
  prefill_peer sizes;
  auto bad = sizes.read(prefill_topology(3), me, layout(0, 2), {2, 1});
  REQUIRE(bad.what == prefill_peer::reading::action::refused);
  CHECK(bad.refusal.code == errc::unsupported);
  CHECK(bad.refusal.origin == me);
  CHECK_THAT(bad.refusal.cause, Catch::Contains("one TP size must divide the other"));
  prefill_peer pages;
  auto mismatch = pages.read(prefill_topology(1, 8), me, layout(0, 1, 4), {1, 1});
  REQUIRE(mismatch.what == prefill_peer::reading::action::refused);
  CHECK(mismatch.refusal.code == errc::layout_mismatch);
  pages.refuse(mismatch.refusal);
  CHECK(pages.phase == prefill_peer::stage::refused);
  CHECK(pages.refusal == mismatch.refusal);
}

TEST_CASE("prefill peer: failures back off while rooms wait, and probe while down",
          "[logic][rank]") {
  prefill_peer peer;
  peer.in_flight = true;
  CHECK(peer.fail("no answer", false) == prefill_peer::retry::idle);
  CHECK_FALSE(peer.in_flight);
  CHECK(peer.last_error == "no answer");
  CHECK(peer.backoff() == 100ms);
  CHECK(peer.fail("no answer", true) == prefill_peer::retry::again);
  CHECK(peer.backoff() == 200ms);
  for (int i = 0; i < 10; ++i)
    peer.fail("no answer", true);
  CHECK(peer.backoff() == 1s);  // capped
  peer.go_down(failure{errc::peer_down, "gone", prefill_me}, std::nullopt);
  CHECK(peer.fail("still gone", true) == prefill_peer::retry::probe);
  CHECK(peer.arm_probe());
  CHECK_FALSE(peer.arm_probe());  // one at a time
}

TEST_CASE("prefill peer: going down voids the handshake and keeps a departure's words",
          "[logic][rank]") {
  prefill_peer peer;
  rank_ref me{role::decode, "d", 2, 0, 0};
  auto plan = peer.read(prefill_topology(2), me, layout(0, 2), {2, 1});
  peer.in_flight = true;
  peer.attempts = 3;
  auto src = plan.sources[0].rank;
  CHECK(peer.serves(src));
  CHECK(peer.same_sources(src));
  auto dead = failure{errc::instance_dead, "tp1 left", src};
  auto first = peer.go_down(dead, std::vector<participant>{peer.everyone.front()});
  CHECK(first.fresh);
  CHECK(first.dropped.size() == 1);
  CHECK(peer.phase == prefill_peer::stage::down);
  CHECK_FALSE(peer.current(plan.round));
  CHECK(peer.sources.empty());
  CHECK(peer.handles.empty());
  CHECK_FALSE(peer.in_flight);
  CHECK(peer.attempts == 0);
  CHECK(peer.everyone.size() == 1);
  CHECK(peer.serves(src));  // still one of the instance's ranks
  CHECK_FALSE(peer.same_sources(src));
  // Once known, the departure's words stay; a second loss changes nothing else.
  auto second = peer.go_down(failure{errc::peer_down, "lost", src}, std::nullopt);
  CHECK_FALSE(second.fresh);
  CHECK(second.dropped.empty());
  CHECK(peer.down_cause == dead);
  CHECK(peer.everyone.size() == 1);
  // Back: a handshake while down brings it up, and says it was down.
  handshake_again(peer, me, layout(0, 2));
  CHECK(peer.come_up());
  CHECK(peer.phase == prefill_peer::stage::ready);
}

TEST_CASE("prefill peer: after lost contact, a lookup that fails means it is down",
          "[logic][rank]") {
  prefill_peer peer;
  rank_ref me{role::decode, "d", 2, 1, 0};
  auto plan = peer.read(prefill_topology(2), me, layout(1, 2), {2, 1});
  peer.in_flight = true;
  auto src = plan.sources[0].rank;
  peer.accept(src, false);
  peer.decider_reached = true;
  REQUIRE(peer.handshake_done());
  peer.come_up();
  peer.handles.emplace(src, prefill_rank_actor{});
  peer.attempts = 2;

  auto dropped = peer.lose_contact(src);
  CHECK(dropped.size() == 1);
  CHECK(peer.phase == prefill_peer::stage::resolving);
  CHECK(peer.contact_lost == src);
  CHECK_FALSE(peer.current(plan.round));
  CHECK(peer.handles.empty());
  CHECK(peer.sources.empty());
  CHECK(peer.attempts == 0);
  CHECK(peer.serves(src));  // its ranks are still known: a verdict naming them finds it
  // With no room waiting too: it is down, not idle until the next room.
  peer.in_flight = true;
  CHECK(peer.fail("connection refused", false) == prefill_peer::retry::down);
  CHECK_FALSE(peer.in_flight);
  peer.go_down(failure{errc::peer_down, "gone", src}, std::nullopt);
  CHECK_FALSE(peer.contact_lost);
  CHECK(peer.fail("connection refused", true) == prefill_peer::retry::probe);

  // A lookup that succeeds instead brings it back, and a later failure is
  // the ordinary kind again.
  prefill_peer cut;
  cut.read(prefill_topology(2), me, layout(1, 2), {2, 1});
  cut.lose_contact(src);
  handshake_again(cut, me, layout(1, 2));
  CHECK_FALSE(cut.come_up());  // it was never down
  CHECK_FALSE(cut.contact_lost);
  CHECK(cut.fail("no answer", false) == prefill_peer::retry::idle);
}

TEST_CASE("prefill peer: down, then lost contact, then up: it says it was down", "[logic][rank]") {
  // The storm's sequence (issue 30): the instance went down (the scheduler's
  // router was told, and sends its rooms elsewhere); a probe read a complete
  // topology, whose handshake failed (its sources stay); a verdict of lost
  // contact for an older room bound to the same rank moved it to resolving.
  // The next handshake brings it up: that must read as back, or the router
  // is never told and routes around a live instance for good.
  prefill_peer peer;
  rank_ref me{role::decode, "d", 2, 1, 0};
  auto plan = peer.read(prefill_topology(2), me, layout(1, 2), {2, 1});
  auto src = plan.sources[0].rank;
  peer.go_down(failure{errc::instance_dead, "tp1 left", src}, std::nullopt);
  peer.read(prefill_topology(2), me, layout(1, 2), {2, 1});
  peer.in_flight = true;
  CHECK(peer.fail("handshake: no answer", true) == prefill_peer::retry::probe);
  REQUIRE(peer.same_sources(src));
  peer.lose_contact(src);
  REQUIRE(peer.phase == prefill_peer::stage::resolving);
  handshake_again(peer, me, layout(1, 2));
  CHECK(peer.come_up());
  // Once said, up again is plain.
  peer.lose_contact(src);
  handshake_again(peer, me, layout(1, 2));
  CHECK_FALSE(peer.come_up());
}

TEST_CASE("fence drains: quiet fences leave, and a stuck writer is cut off once", "[logic][rank]") {
  fence_drains drains;
  auto t0 = std::chrono::steady_clock::time_point{} + 1h;
  drains.add(1, {nullptr, {"a", "b"}, t0, false, room_key{10, 1}});
  drains.add(2, {nullptr, {"c"}, t0 + 5s, true, room_key{11, 2}});
  CHECK(drains.contains(1));
  CHECK(drains.size() == 2);
  std::vector<std::string> cut;
  auto cut_off = [&](const std::string& w) { cut.push_back(w); };
  auto nothing_quiet = [](uint64_t) { return false; };
  CHECK(drains.sweep(t0 + 1s, 10s, nothing_quiet, cut_off).empty());
  CHECK(cut.empty());
  CHECK(drains.sweep(t0 + 10s, 10s, nothing_quiet, cut_off).empty());
  CHECK(cut == std::vector<std::string>{"a", "b"});
  CHECK(drains.sweep(t0 + 12s, 10s, nothing_quiet, cut_off).empty());
  CHECK(cut.size() == 2);  // once
  auto quiet = drains.sweep(
      t0 + 13s, 10s, [](uint64_t t) { return t == 2; }, cut_off);
  REQUIRE(quiet.size() == 1);
  CHECK(quiet[0].key == room_key{11, 2});
  CHECK(quiet[0].staged);
  CHECK_FALSE(drains.contains(2));
  CHECK(drains.contains(1));
  CHECK(drains
            .sweep(
                t0 + 14s, 10s, [](uint64_t) { return true; }, cut_off)
            .size() == 1);
  CHECK(drains.empty());
}

TEST_CASE("decode room: join, key, then requests, in that order", "[logic][rank]") {
  auto local = layout(0, 1);
  rank_ref me{role::decode, "d", 2, 0, 0};
  decode_room room{4, nullptr, "p@host:1", me, local, deadlines{}};
  // First join: the id only (the prefill instance is not known yet).
  auto first = room.next_join(me, {});
  REQUIRE(first);
  CHECK(first->room == 4);
  CHECK(first->prefill.empty());
  CHECK(room.begin_watch());
  CHECK_FALSE(room.begin_watch());  // watched once
  room.key_received();
  room.set_generation(77);
  CHECK_FALSE(room.ready_to_request());  // the prefill side is not named yet
  // Second join names the instance's ranks; no third.
  std::vector<participant> everyone{{rank_ref{role::prefill, "p", 1, 0, 0}, {}, {}},
                                    {rank_ref{role::prefill, "p", 1, 1, 0}, {}, {}}};
  auto second = room.next_join(me, everyone);
  REQUIRE(second);
  CHECK(second->prefill == everyone);
  CHECK_FALSE(room.next_join(me, everyone));
  CHECK_FALSE(room.ready_to_request());  // that join is not keyed yet
  room.key_received();
  CHECK(room.ready_to_request());
  CHECK(room.key() == room_key{4, 77});
}

TEST_CASE("decode room: requests carry pages to writers, the aux row to one, nothing to dummies",
          "[logic][rank]") {
  auto local = layout(0, 1);
  rank_ref me{role::decode, "d", 2, 0, 0};
  decode_room room{4, nullptr, "p@host:1", me, local, deadlines{}};
  REQUIRE_FALSE(room.init({3, 1}, no_aux_slot, {}));
  room_source writer{rank_ref{role::prefill, "p", 1, 0, 0}, false, true, "tcp://a", local, true};
  room_source plain{rank_ref{role::prefill, "p", 1, 1, 0}, false, false, "tcp://b", local, false};
  room_source dummy{rank_ref{role::prefill, "p", 1, 2, 0}, true, false, "tcp://c", local, true};
  room.set_sources({writer, plain, dummy});
  CHECK(room.writers() == std::vector<std::string>{"tcp://a", "tcp://b"});
  CHECK(room.stages());
  auto staged = room.staging_open();
  REQUIRE(staged.writers.size() == 1);  // the dummy stages nothing
  CHECK(staged.writers[0].rank == writer.rank);
  CHECK(staged.dst_pages == std::vector<uint32_t>{3, 1});
  auto asks = room.requests(me, decider_actor{});
  REQUIRE(asks.size() == 3);
  CHECK(asks[0].to == writer.rank);
  CHECK(asks[0].request.dst_pages == std::vector<uint32_t>{3, 1});
  CHECK(asks[0].request.aux_slot == no_aux_slot);  // the room has no aux row
  CHECK(asks[1].request.dst_pages == std::vector<uint32_t>{3, 1});
  CHECK(asks[2].request.dummy);
  CHECK(asks[2].request.dst_pages.empty());
  for (auto& a : asks)
    CHECK(a.request.decode_rank == me);
  room.set_sources({plain});
  CHECK_FALSE(room.stages());
  CHECK(room.staging_open().writers.empty());
}
