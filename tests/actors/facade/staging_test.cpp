// The staging path between whole instances on CAF's deterministic scheduler:
// byte-exact against the head-sliced path for 1→4, 4→1, 2→8 and 8→2 with 8
// and 2 kv heads; a ring smaller than a request (many rounds, nothing
// overwritten); a chunk larger than the ring; an abort, a killed writer and a
// scatter that never runs, each through the failure broadcast, with the
// ring's space given back.
#include "tests/support/instance_fixture.hpp"

#include <cstring>
#include <numeric>
#include <random>

#include "actors/plan/staging_plan.hpp"
#include "actors/staging/staging_actor.hpp"

using namespace kvferry;
using namespace kvferry::test;

namespace {

struct tp_pair {
  uint32_t p, d;
};

/// A room as the test opens it on every rank.
struct planned_room {
  uint64_t id;
  std::vector<uint32_t> src, dst;
  uint32_t aux;
  uint32_t chunk;
};

std::vector<planned_room> plan_rooms(uint32_t pool_pages, uint32_t n, uint32_t max_pages,
                                     uint32_t seed) {
  std::mt19937 rng{seed};
  std::vector<uint32_t> free_src(pool_pages), free_dst(pool_pages);
  std::iota(free_src.begin(), free_src.end(), 0u);
  std::iota(free_dst.begin(), free_dst.end(), 0u);
  std::shuffle(free_src.begin(), free_src.end(), rng);
  std::shuffle(free_dst.begin(), free_dst.end(), rng);
  std::vector<planned_room> rooms;
  uint32_t used = 0;
  for (uint64_t id = 1; id <= n; ++id) {
    auto k = std::uniform_int_distribution<uint32_t>(1, max_pages)(rng);
    planned_room r{id, {}, {}, static_cast<uint32_t>(id), static_cast<uint32_t>(id % 3)};
    for (uint32_t j = 0; j < k; ++j, ++used) {
      r.src.push_back(free_src[used]);
      r.dst.push_back(free_dst[used]);
    }
    rooms.push_back(std::move(r));
  }
  return rooms;
}

/// Every KV byte of every decode rank's pool, after moving `rooms`.
struct moved {
  std::vector<std::vector<std::byte>> decode_kv;
  uint64_t writes = 0;
  uint64_t staged_chunks = 0;
  uint64_t chunks = 0;
  bool all_success = true;
};

moved move_rooms(tp_pair c, uint32_t heads, bool staging, const std::vector<planned_room>& rooms) {
  instance_fixture f;
  f.shape = apps::model_shape{"mha", 4, heads, 8, kv_dtype::bf16, false};
  f.page_size = 16;
  f.staging.enabled = staging;
  f.start(c.p, 1, c.d, 1);
  std::vector<instance_fixture::room_handles> handles;
  for (auto& r : rooms)
    handles.push_back(f.open_room(r.id, r.src, r.dst, r.aux, r.aux, r.chunk));
  f.sched.run();
  moved out;
  for (size_t i = 0; i < rooms.size(); ++i) {
    for (auto& s : handles[i].senders)
      out.all_success = out.all_success && s.poll() == kv_poll::success;
    for (size_t k = 0; k < f.decode.size(); ++k) {
      out.all_success = out.all_success && handles[i].receivers[k].poll() == kv_poll::success;
      out.all_success = out.all_success && f.decode[k].pool->holds_room(f.seed, rooms[i].id,
                                                                        rooms[i].dst, rooms[i].aux);
    }
  }
  for (auto& d : f.decode) {
    std::vector<std::byte> bytes;
    for (auto& b : d.pool->describe().kv) {
      auto* p = static_cast<const std::byte*>(b.base);
      bytes.insert(bytes.end(), p, p + b.length);
    }
    out.decode_kv.push_back(std::move(bytes));
  }
  for (auto& p : f.prefill) {
    auto* t = p.rt->counters();
    out.writes += t->writes;
    out.staged_chunks += t->staged;
    out.chunks += t->chunks;
  }
  return out;
}

}  // namespace

TEST_CASE("staging moves the same bytes as the head-sliced path with one write per chunk",
          "[actors][staging]") {
  auto c = GENERATE(tp_pair{1, 4}, tp_pair{4, 1}, tp_pair{2, 8}, tp_pair{8, 2});
  auto heads = GENERATE(8u, 2u);
  CAPTURE(c.p, c.d, heads);
  auto rooms = plan_rooms(24, 4, 5, c.p * 100 + c.d * 10 + heads);
  auto sliced = move_rooms(c, heads, false, rooms);
  auto staged = move_rooms(c, heads, true, rooms);
  CHECK(sliced.all_success);
  CHECK(staged.all_success);
  CHECK(sliced.staged_chunks == 0u);
  REQUIRE(staged.decode_kv.size() == sliced.decode_kv.size());
  for (size_t k = 0; k < staged.decode_kv.size(); ++k) {
    CAPTURE(k);
    CHECK(staged.decode_kv[k] == sliced.decode_kv[k]);
  }
  // Staging applies wherever a rank's slice is narrower than a row: then every
  // chunk goes as one bulk write (plus the aux row of the last one).
  kv_layout src, dst;
  src.total_kv_heads = dst.total_kv_heads = heads;
  src.tp_size = c.p;
  dst.tp_size = c.d;
  src.kv_heads = heads_per_rank(heads, c.p);
  dst.kv_heads = heads_per_rank(heads, c.d);
  bool narrower = src.kv_heads != dst.kv_heads;
  CAPTURE(staged.writes, sliced.writes, staged.staged_chunks, staged.chunks);
  if (narrower) {
    CHECK(staged.staged_chunks == staged.chunks);
    CHECK(staged.writes * 4 < sliced.writes);
  } else {
    CHECK(staged.staged_chunks == 0u);
    CHECK(staged.writes == sliced.writes);
  }
}

TEST_CASE_METHOD(instance_fixture, "staging: a ring smaller than a request goes round many times",
                 "[actors][staging]") {
  shape = apps::model_shape{"mha", 4, 8, 8, kv_dtype::bf16, false};
  page_size = 16;
  pool_pages = 64;
  // One page of 4 writers (2 heads each) is 4 x 16 x 2 x 8 x 2 B x 8 buffers = 16 KiB:
  // a ring of 40 KiB holds two one-page chunks and a half.
  staging.ring_bytes = 40 << 10;
  start(4, 1, 1, 1);
  std::vector<uint32_t> src(40), dst(40);
  std::iota(src.begin(), src.end(), 0u);
  std::iota(dst.begin(), dst.end(), 10u);
  std::shuffle(dst.begin(), dst.end(), std::mt19937{3});
  auto h1 = open_room(1, std::vector<uint32_t>(src.begin(), src.begin() + 20),
                      std::vector<uint32_t>(dst.begin(), dst.begin() + 20), 1, 1, 1);
  auto h2 = open_room(2, std::vector<uint32_t>(src.begin() + 20, src.end()),
                      std::vector<uint32_t>(dst.begin() + 20, dst.end()), 2, 2, 1);
  sched.run();
  for (auto* h : {&h1, &h2}) {
    for (auto& s : h->senders)
      CHECK(s.poll() == kv_poll::success);
    CHECK(h->receivers[0].poll() == kv_poll::success);
  }
  CHECK(
      decode[0].pool->holds_room(seed, 1, std::vector<uint32_t>(dst.begin(), dst.begin() + 20), 1));
  CHECK(decode[0].pool->holds_room(seed, 2, std::vector<uint32_t>(dst.begin() + 20, dst.end()), 2));
  auto& ring = state_of<staging_state>(decode[0].rt->staging());
  // 40 chunks of 16 KiB through 40 KiB: the ring went round at least 16 times.
  CHECK(ring.book->watermark() >= 16 * ring.book->ring_size());
  CHECK(ring.book->chunks_held() == 0u);
  CHECK(ring.book->rooms() == 0u);
  CHECK(ring.scatters == 160u);
}

TEST_CASE_METHOD(instance_fixture,
                 "staging: a chunk larger than the ring fails its room on every rank naming both "
                 "sizes",
                 "[actors][staging]") {
  shape = apps::model_shape{"mha", 4, 8, 8, kv_dtype::bf16, false};
  page_size = 16;
  staging.ring_bytes = 40 << 10;
  start(4, 1, 1, 1);
  // Three pages in one chunk: 48 KiB.
  auto big = open_room(1, {0, 1, 2}, {0, 1, 2}, 1, 1, 0);
  auto fine = open_room(2, {3}, {3}, 2, 2, 0);
  sched.run();
  CHECK(fine.receivers[0].poll() == kv_poll::success);
  REQUIRE(big.receivers[0].poll() == kv_poll::failed);
  auto why = big.receivers[0].failure();
  REQUIRE(why);
  CHECK(why->why.code == errc::staging_oversized);
  CHECK_THAT(why->why.cause, Catch::Contains("needs 49152 bytes"));
  CHECK_THAT(why->why.cause, Catch::Contains("staging ring of 40960 bytes"));
  for (auto& s : big.senders) {
    REQUIRE(s.poll() == kv_poll::failed);
    CHECK(s.failure()->why == why->why);
  }
  auto& ring = state_of<staging_state>(decode[0].rt->staging());
  CHECK(ring.book->chunks_held() == 0u);
  CHECK(ring.book->rooms() == 0u);
}

TEST_CASE_METHOD(instance_fixture, "staging: an aborted room gives its ring space back",
                 "[actors][staging]") {
  shape = apps::model_shape{"mha", 4, 8, 8, kv_dtype::bf16, false};
  page_size = 16;
  start(1, 1, 4, 1);
  // The prefill rank never sends its chunks: the decode ranks' rings hold
  // nothing yet; then the decode scheduler aborts while the chunks are
  // granted but not written.
  std::vector<receiver> receivers;
  for (auto& r : decode) {
    receivers.push_back(r.rt->make_receiver(1, where()));
    receivers.back().init({0, 1, 2, 3}, 1);
  }
  prefill[0].pool->fill_room(seed, 1, {0, 1, 2, 3}, 1);
  auto s = prefill[0].rt->make_sender(1);
  s.init(4, 1);
  // Freeze the transfer actor once it asked: grants come, no write goes.
  s.send({0, 1}, false);
  sched.run();
  CHECK(prefill[0].rt->counters()->staged == 4u);  // chunk 0 to each of the 4 decode ranks
  s.send({2, 3}, true);
  freeze(prefill[0].rt->transfer());
  run_live();
  receivers[0].abort();
  run_live();
  thaw(prefill[0].rt->transfer());
  sched.run();
  pass(std::chrono::seconds{1});
  CHECK(s.poll() == kv_poll::failed);
  for (auto& r : receivers) {
    REQUIRE(r.poll() == kv_poll::failed);
    CHECK(r.failure()->why.code == errc::aborted);
  }
  for (auto& r : decode) {
    auto& ring = state_of<staging_state>(r.rt->staging());
    CHECK(ring.book->chunks_held() == 0u);
    CHECK(ring.book->rooms() == 0u);
  }
  // The rings serve the next room.
  auto next = open_room(2, {4, 5}, {4, 5}, 2, 2, 1);
  sched.run();
  CHECK(next.senders[0].poll() == kv_poll::success);
  for (auto& r : next.receivers)
    CHECK(r.poll() == kv_poll::success);
}

TEST_CASE_METHOD(instance_fixture,
                 "staging: a writer killed mid-room fails it on every rank with one cause",
                 "[actors][staging]") {
  shape = apps::model_shape{"mha", 4, 8, 8, kv_dtype::bf16, false};
  page_size = 16;
  start(4, 1, 1, 1);
  std::vector<sender> senders;
  auto r = decode[0].rt->make_receiver(1, where());
  r.init({0, 1, 2, 3}, 1);
  for (auto& p : prefill) {
    p.pool->fill_room(seed, 1, {0, 1, 2, 3}, 1);
    senders.push_back(p.rt->make_sender(1));
    senders.back().init(4, 1);
  }
  for (size_t i = 0; i < senders.size(); ++i)
    senders[i].send({0, 1}, false);
  sched.run();
  // Writer 2 dies before its last chunk.
  caf::anon_send_exit(prefill[2].rt->prefill(), caf::exit_reason::kill);
  caf::anon_send_exit(prefill[2].rt->transfer(), caf::exit_reason::kill);
  for (size_t i = 0; i < senders.size(); ++i)
    if (i != 2)
      senders[i].send({2, 3}, true);
  sched.run();
  pass(std::chrono::seconds{5});
  REQUIRE(r.poll() == kv_poll::failed);
  auto why = r.failure()->why;
  CHECK(why.origin.tp == 2);
  for (size_t i = 0; i < senders.size(); ++i)
    if (i != 2) {
      REQUIRE(senders[i].poll() == kv_poll::failed);
      CHECK(senders[i].failure()->why == why);
    }
  auto& ring = state_of<staging_state>(decode[0].rt->staging());
  CHECK(ring.book->chunks_held() == 0u);
  CHECK(ring.book->rooms() == 0u);
}

TEST_CASE_METHOD(instance_fixture,
                 "staging: a scatter that never runs fails its room by its deadline",
                 "[actors][staging]") {
  shape = apps::model_shape{"mha", 4, 8, 8, kv_dtype::bf16, false};
  page_size = 16;
  limits.transferring = std::chrono::seconds{2};
  start(2, 1, 1, 1);
  freeze(decode[0].rt->staging());
  auto h = open_room(1, {0, 1}, {0, 1}, 1, 1, 0);
  run_live();
  pass(limits.transferring + limits.verdict + std::chrono::seconds{5});
  REQUIRE(h.receivers[0].poll() == kv_poll::failed);
  auto why = h.receivers[0].failure()->why;
  CHECK(why.code == errc::deadline);
  for (auto& s : h.senders) {
    REQUIRE(s.poll() == kv_poll::failed);
    CHECK(s.failure()->why == why);
  }
}

TEST_CASE_METHOD(instance_fixture,
                 "staging: a last chunk with no pages follows the staged chunks of its room",
                 "[actors][staging]") {
  shape = apps::model_shape{"mha", 4, 8, 8, kv_dtype::bf16, false};
  page_size = 16;
  start(4, 1, 1, 1);
  auto r = decode[0].rt->make_receiver(1, where());
  r.init({5, 6, 7}, 1);
  std::vector<sender> senders;
  for (auto& p : prefill) {
    p.pool->fill_room(seed, 1, {0, 1, 2}, 1);
    senders.push_back(p.rt->make_sender(1));
    senders.back().init(3, 1);
    senders.back().send({0, 1, 2}, false);
    senders.back().send({}, true);  // the states and aux row only
  }
  sched.run();
  CHECK(r.poll() == kv_poll::success);
  for (auto& s : senders)
    CHECK(s.poll() == kv_poll::success);
  CHECK(decode[0].pool->holds_room(seed, 1, {5, 6, 7}, 1));
  for (auto& p : prefill)
    CHECK(p.rt->counters()->staged == 1u);  // the chunk with pages
}
