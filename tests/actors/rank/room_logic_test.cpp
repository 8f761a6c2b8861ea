// The plain room classes of both sides and the bootstrap's directory: every
// refusal names the value and what was expected.
#include <catch2/catch.hpp>

#include "actors/bootstrap/directory.hpp"
#include "actors/rank/decode_room.hpp"
#include "actors/rank/prefill_room.hpp"

using namespace kvferry;

namespace {

kv_layout layout(uint32_t pages = 32, uint32_t aux_rows = 4) {
  kv_layout l;
  l.page_size = 16;
  l.dtype = kv_dtype::bf16;
  l.layer_ids = {0};
  l.kv_heads = l.total_kv_heads = 1;
  l.head_dim = 8;
  auto item = uint64_t{16} * 8 * 2;
  l.kv_buffers = {{1, 0, item * pages, item}, {2, 0, item * pages, item}};
  if (aux_rows)
    l.aux_buffers = {{3, 0, 64ull * aux_rows, 64}};
  return l;
}

rank_ref me{role::prefill, "p", 1, 0, 0};
rank_ref dec{role::decode, "d", 2, 0, 0};

room_request request(uint64_t room, std::vector<uint32_t> pages, uint32_t aux = 0) {
  return room_request{room_key{room, 9}, dec, {}, std::move(pages), aux, {}, false};
}

}  // namespace

TEST_CASE("prefill room: init and chunks are checked against each other", "[logic][room]") {
  auto l = layout();
  prefill_room room{5, nullptr, me, l, deadlines{}};
  auto bad = room.accept({1, 2}, false);
  REQUIRE(bad);
  CHECK(bad->code == errc::invalid_chunk);
  CHECK(bad->cause == "chunk of 2 pages sent before init");
  CHECK(bad->origin == me);

  CHECK(room.init(40, 0)->cause == "num_pages 40 above the prefill pool's 32 pages");
  CHECK(room.init(4, 7)->cause == "aux_slot 7 out of range, the aux buffers hold 4 rows");
  REQUIRE_FALSE(room.init(4, 1));
  CHECK(room.init(4, 1)->cause == "init called twice for room 5 (first with 4 pages)");

  CHECK(room.accept({1, 2, 3, 4, 5}, false)->cause ==
        "chunk of 5 pages ends at page 5, past the room's 4 pages");
  CHECK(room.accept({1, 99}, false)->cause ==
        "source page 99 out of range, the prefill pool holds 32 pages");
  REQUIRE_FALSE(room.accept({1, 2}, false));
  CHECK(room.accept({3}, true)->cause == "last chunk ends at page 3 of the room's 4 pages");
  REQUIRE_FALSE(room.accept({3, 4}, true));
  CHECK(room.accept({6}, false)->cause ==
        "chunk of 1 page after the last one (the room ended at page 4)");
}

TEST_CASE("prefill room: the destination is checked and the jobs follow it", "[logic][room]") {
  auto l = layout();
  auto dl = layout(8, 2);
  prefill_room room{5, nullptr, me, l, deadlines{}};
  REQUIRE_FALSE(room.init(3, 1));
  CHECK(room.bind(request(5, {1, 2}), dl, 1)->cause ==
        "decode d tp0 pp0 gave 2 pages for a room of 3 pages");
  CHECK(room.bind(request(5, {1, 2, 8}), dl, 1)->cause ==
        "destination page 8 out of range, the decode pool holds 8 pages");
  CHECK(room.bind(request(5, {1, 2, 3}, 2), dl, 1)->cause ==
        "destination aux_slot 2 out of range, the aux buffers hold 2 rows");
  REQUIRE_FALSE(room.accept({10, 11}, false));
  CHECK(room.take_jobs().empty());  // no destination yet
  REQUIRE_FALSE(room.bind(request(5, {7, 0, 3}, 1), dl, 1));
  CHECK(room.bound());
  CHECK(room.key() == room_key{5, 9});
  CHECK(room.bind(request(5, {7, 0, 3}, 1), dl, 1)->code == errc::duplicate_room);

  auto jobs = room.take_jobs();
  REQUIRE(jobs.size() == 1);
  CHECK(jobs[0].src_pages == std::vector<uint32_t>{10, 11});
  CHECK(jobs[0].dst_pages == std::vector<uint32_t>{7, 0});
  CHECK_FALSE(jobs[0].last);
  REQUIRE_FALSE(room.accept({12}, true));
  jobs = room.take_jobs();
  REQUIRE(jobs.size() == 1);
  CHECK(jobs[0].dst_pages == std::vector<uint32_t>{3});
  CHECK(jobs[0].last);
  CHECK(jobs[0].src_aux == 1u);
  CHECK(jobs[0].dst_aux == 1u);
  CHECK(room.in_flight() == 2);
  CHECK_FALSE(room.done());
  CHECK_FALSE(room.landed(dec));
  CHECK(room.landed(dec));
  CHECK(room.done());
}

TEST_CASE("prefill room: decode's prefix skips the held tokens of the first chunk only",
          "[logic][room][prefix]") {
  auto l = layout();
  auto dl = layout(8, 2);
  auto slot = std::make_shared<room_slot>();
  prefill_room room{5, slot, me, l, deadlines{}};
  REQUIRE_FALSE(room.init(3, 1));
  rank_ref dec1{role::decode, "d", 2, 1, 0};
  auto first = request(5, {7, 0, 3}, 1);
  first.prefix_tokens = 37;  // two whole pages of 16 and 5 tokens of the third
  REQUIRE_FALSE(room.bind(first, dl, 2));
  CHECK(slot->prefix_tokens() == 0);  // published once every destination is known
  auto second = request(5, {1, 2, 4}, no_aux_slot);
  second.decode_rank = dec1;
  second.prefix_tokens = 36;
  auto bad = room.bind(second, dl, 2);
  REQUIRE(bad);
  CHECK(bad->code == errc::invalid_argument);
  CHECK(bad->cause ==
        "decode d tp1 pp0 holds a prefix of 36 tokens of room 5#9 and decode d tp0 pp0 one "
        "of 37, expected the same on every decode rank");
  second.prefix_tokens = 37;
  REQUIRE_FALSE(room.bind(second, dl, 2));
  CHECK(room.prefix_tokens() == 37);
  CHECK(slot->prefix_tokens() == 37);
  REQUIRE_FALSE(room.accept({10, 11}, false));
  REQUIRE_FALSE(room.accept({12}, true));
  auto jobs = room.take_jobs();
  REQUIRE(jobs.size() == 4);
  for (auto& j : jobs)
    CHECK(j.skip_tokens == (j.first_page == 0 ? 5u : 0u));
}

TEST_CASE("prefill room: a rank whose destinations are all dummies is done with its last chunk",
          "[logic][room]") {
  auto l = layout();
  auto dl = layout(8, 2);
  prefill_room room{6, nullptr, me, l, deadlines{}};
  REQUIRE_FALSE(room.init(2, 0));
  auto req = request(6, {});
  req.dummy = true;
  req.aux_slot = no_aux_slot;
  REQUIRE_FALSE(room.bind(req, dl, 1));
  REQUIRE_FALSE(room.accept({4, 5}, true));
  CHECK(room.take_jobs().empty());
  CHECK(room.done());
}

TEST_CASE("prefill room: state indices come with the last chunk and are checked", "[logic][room]") {
  auto l = layout();
  auto item = uint64_t{64};
  l.states = {{state_kind::single_slot, {{7, 0, item * 4, item}}},
              {state_kind::page_indexed, {{8, 0, item * 16, item}}}};
  prefill_room room{7, nullptr, me, l, deadlines{}};
  REQUIRE_FALSE(room.init(1, 0));
  CHECK(room.accept({1}, false, {{0}, {1}})->cause ==
        "state indices on a chunk that is not the last");
  CHECK(room.accept({1}, true, {{0}})->cause == "1 state index lists for 2 state components");
  CHECK(room.accept({1}, true, {{0, 1}, {1}})->cause ==
        "state component 0 (single_slot): 2 indices, expected one");
  CHECK(room.accept({1}, true, {{4}, {1}})->cause ==
        "state component 0 (single_slot): index 4 out of range, it holds 4 items");
  REQUIRE_FALSE(room.accept({1}, true, {{3}, {1, 2, 15}}));
}

TEST_CASE("decode room: destination pages must be distinct and in range", "[logic][room]") {
  auto l = layout(8, 2);
  decode_room room{5, nullptr, "local:1", dec, l, deadlines{}};
  CHECK(room.init({1, 8}, 0, {})->cause ==
        "destination page 8 at position 1 out of range, the decode pool holds 8 pages");
  CHECK(room.init({1, 2, 1}, 0, {})->cause ==
        "destination page 1 given twice (again at position 2), expected distinct pages");
  CHECK(room.init({1}, 5, {})->cause == "aux_slot 5 out of range, the aux buffers hold 2 rows");
  CHECK(room.init({1}, no_aux_slot, {})->cause ==
        "aux_slot none out of range, the aux buffers hold 2 rows");
  CHECK(room.init({1}, 0, {{1}})->cause == "1 state index lists for 0 state components");
  REQUIRE_FALSE(room.init({1, 2}, 0, {}));
  CHECK_FALSE(room.keyed());
  room.set_generation(4);
  room.set_generation(5);  // the first generation stays
  CHECK(room.key() == room_key{5, 4});
}

TEST_CASE("decode room: only its sources count - each up to its last chunk", "[logic][room]") {
  auto l = layout(8, 2);
  decode_room room{5, nullptr, "local:1", dec, l, deadlines{}};
  rank_ref dummy{role::prefill, "p", 1, 1, 0};
  room.set_sources({{me, false, true, "local:1", {}, false}, {dummy, true, false, "", {}, false}});
  rank_ref stranger{role::prefill, "x", 1, 3, 0};
  CHECK_THAT(room.landed(chunk_landed{room.key(), dummy, 0, 1, 10, false})->cause,
             Catch::Contains("which is not a writing source"));
  CHECK(room.landed(chunk_landed{room.key(), stranger, 0, 1, 10, false})->code ==
        errc::invalid_chunk);
  REQUIRE_FALSE(room.landed(chunk_landed{room.key(), me, 0, 1, 10, false}));
  CHECK(room.fsm().state() == kv_poll::transferring);
  CHECK_FALSE(room.all_sources_done());
  REQUIRE_FALSE(room.landed(chunk_landed{room.key(), me, 1, 1, 10, true}));
  CHECK(room.all_sources_done());
  CHECK(room.bytes_landed() == 20);
  CHECK_THAT(room.landed(chunk_landed{room.key(), me, 2, 1, 10, false})->cause,
             Catch::Contains("after its last chunk"));
}

TEST_CASE("directory: ranks must agree on sizes - page size and dtype", "[logic][bootstrap]") {
  directory dir{"prefill-0", 77};
  auto l2 = layout();
  l2.tp_size = 2;
  l2.kv_heads = 1;
  l2.total_kv_heads = 2;
  rank_registration r0{rank_ref{role::prefill, "", 0, 0, 0}, {}, "tcp://a:1", l2, 2, 1, {}, 0, {}};
  REQUIRE_FALSE(dir.add(r0));
  auto topo = dir.snapshot();
  CHECK_FALSE(topo.complete());
  CHECK(topo.ranks[0].rank.instance == "prefill-0");
  CHECK(topo.ranks[0].rank.instance_generation == 77u);

  auto r1 = r0;
  r1.rank.tp = 1;
  r1.tp_size = 4;
  CHECK(*dir.add(r1) == "rank tp1 pp0 registered tp_size 4 x pp_size 1, the instance has 2 x 1");
  r1.tp_size = 2;
  r1.layout.tp_rank = 1;
  r1.layout.page_size = 32;
  for (auto& b : r1.layout.kv_buffers)
    b.item_len *= 2;
  CHECK(*dir.add(r1) == "rank tp1 pp0 registered page_size 32, the instance's other ranks use 16");
  r1.layout = l2;
  r1.layout.tp_rank = 1;
  r1.rank.tp = 2;
  CHECK(*dir.add(r1) == "rank tp2 pp0 outside tp_size 2 x pp_size 1");
  r1.rank.tp = 1;
  REQUIRE_FALSE(dir.add(r1));
  CHECK(dir.snapshot().complete());
  CHECK(dir.remove(1, 0));
  CHECK_FALSE(dir.snapshot().complete());
  CHECK_FALSE(dir.remove(1, 0));
}

TEST_CASE("directory: a rank that departs leaves the instance dead until it registers again",
          "[logic][bootstrap]") {
  directory dir{"prefill-0", 77, "10.0.0.5:8998"};
  auto l2 = layout();
  l2.tp_size = 2;
  l2.kv_heads = 1;
  l2.total_kv_heads = 2;
  rank_registration r0{rank_ref{role::prefill, "", 0, 0, 0}, {}, "tcp://a:1", l2, 2, 1, {}, 0, {}};
  auto r1 = r0;
  r1.rank.tp = 1;
  r1.layout.tp_rank = 1;
  REQUIRE_FALSE(dir.add(r0));
  REQUIRE_FALSE(dir.add(r1));
  CHECK_FALSE(dir.snapshot().dead());

  // Nobody registered at tp3: nothing to record.
  CHECK_FALSE(
      dir.depart(rank_left{rank_ref{role::prefill, "x", 1, 3, 0}, "kill", false, true, 5, {}}));
  auto gone =
      dir.depart(rank_left{rank_ref{role::prefill, "", 0, 1, 0}, "kill", false, true, 5, {}});
  REQUIRE(gone);
  CHECK(gone->bootstrap == "10.0.0.5:8998");
  CHECK(gone->rank.instance == "prefill-0");
  CHECK(gone->rank.instance_generation == 77u);
  auto topo = dir.snapshot();
  CHECK(topo.dead());
  CHECK_FALSE(topo.complete());
  CHECK(topo.tp_size == 2);  // the shape stays while a rank is missing
  REQUIRE(topo.departed.size() == 1);
  CHECK(topo.departed[0] == *gone);
  CHECK(topo.bootstrap == "10.0.0.5:8998");
  REQUIRE(instance_dead(topo));
  CHECK(instance_dead(topo)->code == errc::instance_dead);

  // The rank registers again: whole, and nothing departed.
  REQUIRE_FALSE(dir.add(r1));
  topo = dir.snapshot();
  CHECK(topo.complete());
  CHECK_FALSE(topo.dead());
  CHECK_FALSE(instance_dead(topo));
}
