// The staging path's plain logic: the ring's rounds and watermark, the
// gather and scatter plans (a gather then a scatter is the sliced path's
// bytes), and the book's checks of every remote value.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <span>
#include <vector>

#include "actors/plan/planner.hpp"
#include "actors/plan/staging_plan.hpp"
#include "actors/staging/staging_book.hpp"
#include "actors/staging/staging_ring.hpp"

using namespace kvferry;

namespace {

/// An MHA layout of `layers` layers, `heads` kv heads in all, for rank `tp`
/// of `tp_size`; buffers K then V, each `pages` pages, in region 1 back to back.
kv_layout mha(uint32_t heads, uint32_t tp_size, uint32_t tp, uint32_t layers = 3, uint32_t page = 4,
              uint32_t pages = 16, uint32_t head_dim = 8) {
  kv_layout x;
  x.page_size = page;
  x.dtype = kv_dtype::bf16;
  for (uint32_t l = 0; l < layers; ++l)
    x.layer_ids.push_back(l);
  x.total_kv_heads = heads;
  x.kv_heads = heads_per_rank(heads, tp_size);
  x.head_dim = head_dim;
  x.tp_rank = tp;
  x.tp_size = tp_size;
  uint64_t item = uint64_t{page} * x.kv_heads * head_dim * 2;
  uint64_t at = 0;
  for (uint32_t b = 0; b < 2 * layers; ++b) {
    x.kv_buffers.push_back({1, at, item * pages, item});
    at += item * pages;
  }
  return x;
}

uint64_t pool_bytes(const kv_layout& x) {
  auto& last = x.kv_buffers.back();
  return last.offset + last.length;
}

/// Runs copies between a pool (buffers at their layout offsets) and a block,
/// as the actors do: segment lists per buffer, checked copies.
void run(const kv_layout& side, std::vector<std::byte>& pool, std::vector<std::byte>& block,
         const std::vector<staged_copy>& copies, bool to_block) {
  auto lists = segments_by_buffer(copies, side.kv_buffers.size(), 0, to_block);
  for (size_t b = 0; b < lists.size(); ++b) {
    std::span<std::byte> buffer{pool.data() + side.kv_buffers[b].offset, side.kv_buffers[b].length};
    auto rc = to_block ? transport::copy_segments_cpu(block, buffer, lists[b])
                       : transport::copy_segments_cpu(buffer, block, lists[b]);
    REQUIRE(rc.ok());
  }
}

}  // namespace

TEST_CASE("staging ring: rounds wrap and the watermark frees what was consumed",
          "[staging][logic]") {
  staging_ring ring{100};
  CHECK_FALSE(ring.assign(0));
  CHECK_FALSE(ring.assign(101));
  auto a = *ring.assign(60);
  auto b = *ring.assign(30);
  CHECK(a == ring_grant{0, 0, 60});
  CHECK(b == ring_grant{60, 60, 90});
  // 20 do not fit before the end: the next round starts at offset 0.
  auto c = *ring.assign(20);
  CHECK(c == ring_grant{100, 0, 120});
  CHECK(ring.watermark() == 0);
  // c reuses bytes [0, 20) of a, still held.
  CHECK(may_write(a.end, 100, ring.watermark()));
  CHECK(may_write(b.end, 100, ring.watermark()));
  CHECK_FALSE(may_write(c.end, 100, ring.watermark()));
  // Released out of order: the watermark waits for the oldest.
  CHECK_FALSE(ring.release(b.start));
  CHECK(ring.watermark() == 0);
  CHECK(ring.release(a.start));
  CHECK(ring.watermark() == 100);
  CHECK(may_write(c.end, 100, ring.watermark()));
  CHECK(ring.release(c.start));
  CHECK(ring.watermark() == 120);
  CHECK(ring.held() == 0);
  CHECK_FALSE(ring.release(12345));
}

TEST_CASE("staging ring: a grant never overlaps bytes still held", "[staging][logic]") {
  std::mt19937 rng{7};
  staging_ring ring{1000};
  std::vector<ring_grant> held;
  uint64_t written = 0;
  for (int step = 0; step < 20000; ++step) {
    if (held.size() < 8 && rng() % 2 == 0) {
      held.push_back(*ring.assign(1 + rng() % 400));
      continue;
    }
    if (held.empty())
      continue;
    // Every grant that may be written overlaps no older grant still held
    // (newer ones overlapping it wait for it in turn).
    for (auto& g : held) {
      if (!may_write(g.end, ring.size(), ring.watermark()))
        continue;
      ++written;
      for (auto& other : held)
        if (other.start < g.start) {
          auto lo = std::max(g.offset, other.offset);
          auto hi =
              std::min(g.offset + (g.end - g.start), other.offset + (other.end - other.start));
          CHECK(lo >= hi);
        }
    }
    auto victim = rng() % held.size();
    ring.release(held[victim].start);
    held.erase(held.begin() + static_cast<long>(victim));
  }
  CHECK(written > 1000);
}

TEST_CASE("staging plans: gather then scatter places the sliced path's bytes", "[staging][logic]") {
  struct tp_case {
    uint32_t p, d;
  };
  auto c = GENERATE(tp_case{1, 4}, tp_case{4, 1}, tp_case{2, 8}, tp_case{8, 2});
  auto heads = GENERATE(8u, 2u);
  auto skip = GENERATE(0u, 1u, 3u);  // prefix reuse: tokens of the first page decode holds
  CAPTURE(c.p, c.d, heads, skip);
  std::mt19937 rng{c.p * 100 + c.d * 10 + heads + skip};
  for (uint32_t pt = 0; pt < c.p; ++pt)
    for (uint32_t dt = 0; dt < c.d; ++dt) {
      auto src = mha(heads, c.p, pt);
      auto dst = mha(heads, c.d, dt);
      auto slice = slice_between(src, dst);
      if (slice.n_heads == 0)
        continue;
      CAPTURE(pt, dt);
      auto geometry = geometry_of(src, dst);
      REQUIRE(geometry.ok());
      CHECK(staging_applies(src, dst) == !geometry->whole);
      std::vector<std::byte> src_pool(pool_bytes(src));
      for (auto& b : src_pool)
        b = static_cast<std::byte>(rng());
      std::vector<uint32_t> sp(16), dp(16);
      std::iota(sp.begin(), sp.end(), 0u);
      std::iota(dp.begin(), dp.end(), 0u);
      std::shuffle(sp.begin(), sp.end(), rng);
      std::shuffle(dp.begin(), dp.end(), rng);
      sp.resize(5);
      dp.resize(5);
      // The sliced path, applied to a zeroed destination.
      std::vector<std::byte> sliced(pool_bytes(dst));
      auto plan = plan_kv(src, dst, sp, dp, 0, skip);
      REQUIRE(plan.ok());
      for (auto& op : plan->ops)
        std::memcpy(sliced.data() + op.remote_offset, src_pool.data() + op.local_offset, op.length);
      // The staged path: the block carries whole pages, the scatter leaves
      // the held tokens alone.
      auto bytes = staged_bytes(src, dst, sp.size());
      std::vector<std::byte> block(bytes);
      auto gather = plan_gather(src, dst, sp);
      auto scatter = plan_scatter(src, dst, dp, skip);
      REQUIRE(gather.ok());
      REQUIRE(scatter.ok());
      CHECK(copied_bytes(*gather) == bytes);
      auto held = geometry->pairs.size() * skip * geometry->slice_bytes;
      CHECK(copied_bytes(*scatter) == bytes - held);
      CHECK(plan->bytes == bytes - held);
      run(src, src_pool, block, *gather, true);
      std::vector<std::byte> staged(pool_bytes(dst));
      run(dst, staged, block, *scatter, false);
      CHECK(staged == sliced);
    }
  if (skip > 0) {
    auto src = mha(heads, c.p, 0);
    auto dst = mha(heads, c.d, 0);
    auto page = plan_scatter(src, dst, std::vector<uint32_t>{0}, src.page_size);
    REQUIRE_FALSE(page.ok());
    CHECK_THAT(page.error().message(), Catch::Contains("expected fewer than the page size"));
  }
}

TEST_CASE("staging plans: never for MLA or whole rows", "[staging][logic]") {
  auto a = mha(8, 2, 0);
  auto b = mha(8, 2, 0);
  CHECK_FALSE(staging_applies(a, b));
  a.mla = b.mla = true;
  CHECK_FALSE(staging_applies(a, b));
  auto bad = plan_gather(mha(8, 1, 0), mha(8, 4, 1), std::vector<uint32_t>{99});
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.error().message(), Catch::Contains("source page 99"));
}

TEST_CASE("staging book: grants per chunk and checks what writers say", "[staging][logic]") {
  // Decode TP 1 with 8 heads, fed by prefill TP 4: four writers of 2 heads.
  auto local = mha(8, 1, 0);
  rank_ref me{role::decode, "decode-0", 1, 0, 0};
  std::vector<staging_writer> writers;
  for (uint32_t t = 0; t < 4; ++t)
    writers.push_back({rank_ref{role::prefill, "prefill-0", 1, t, 0}, mha(8, 4, t)});
  auto part = staged_bytes(writers[0].layout, local, 2);
  staging_book book{local, me, 9 * part};
  room_key key{42, 7};
  book.open({key, {3, 4, 5, 6, 7}, writers});
  auto ask = [&](uint32_t w, uint32_t chunk, uint32_t first, uint32_t pages) {
    return book.ask(
        {key, writers[w].rank, chunk, first, pages, staged_bytes(writers[w].layout, local, pages)});
  };
  SECTION("writers get their own parts of one chunk's space") {
    auto g0 = std::get<staging_grant>(ask(0, 0, 0, 2));
    auto g3 = std::get<staging_grant>(ask(3, 0, 0, 2));
    CHECK(g0.offset == 0);
    CHECK(g3.offset == 3 * part);
    CHECK(g0.end == 4 * part);
    CHECK(book.chunks_held() == 1u);
    // Every writer arrives; then the space goes back.
    for (uint32_t w = 0; w < 4; ++w) {
      auto s = book.arrive(chunk_landed{key, writers[w].rank, 0, 2, part, false, true, 0});
      REQUIRE(std::holds_alternative<staging_book::scatter>(s));
      CHECK(std::get<staging_book::scatter>(s).ring_offset == w * part);
    }
    CHECK(book.chunks_held() == 0u);
    CHECK(book.watermark() == 4 * part);
  }
  SECTION("remote values are checked and named") {
    auto stranger = rank_ref{role::prefill, "prefill-9", 1, 0, 0};
    auto f = std::get<failure>(book.ask({key, stranger, 0, 0, 2, part}));
    CHECK_THAT(f.cause, Catch::Contains("not a staging writer"));
    f = std::get<failure>(ask(0, 0, 4, 2));
    CHECK(f.code == errc::invalid_pages);
    CHECK_THAT(f.cause, Catch::Contains("pages [4, 6) outside the room's 5 pages"));
    f = std::get<failure>(book.ask({key, writers[0].rank, 0, 0, 2, part + 1}));
    CHECK_THAT(f.cause, Catch::Contains("expected " + std::to_string(part) + " bytes"));
    REQUIRE(std::holds_alternative<staging_grant>(ask(0, 1, 0, 2)));
    f = std::get<failure>(ask(1, 1, 2, 2));
    CHECK(f.code == errc::invalid_chunk);
    f = std::get<failure>(book.arrive(chunk_landed{key, writers[0].rank, 1, 3, 0, false, true, 0}));
    CHECK_THAT(f.cause, Catch::Contains("its space was granted for [0, +2)"));
    f = std::get<failure>(book.arrive(chunk_landed{key, writers[0].rank, 5, 2, 0, false, true, 0}));
    CHECK_THAT(f.cause, Catch::Contains("without ring space"));
    f = std::get<failure>(book.ask({room_key{43, 1}, writers[0].rank, 0, 0, 2, part}));
    CHECK(f.code == errc::unknown_room);
  }
  SECTION("a chunk larger than the ring is refused with both sizes") {
    auto f = std::get<failure>(ask(0, 0, 0, 5));
    CHECK(f.code == errc::staging_oversized);
    CHECK_THAT(
        f.cause,
        Catch::Contains("needs " + std::to_string(4 * staged_bytes(writers[0].layout, local, 5)) +
                        " bytes"));
    CHECK_THAT(f.cause, Catch::Contains("staging ring of " + std::to_string(9 * part) + " bytes"));
  }
  SECTION("closing a room gives back its space") {
    REQUIRE(std::holds_alternative<staging_grant>(ask(0, 0, 0, 2)));
    REQUIRE(std::holds_alternative<staging_grant>(ask(0, 1, 2, 2)));
    CHECK(book.chunks_held() == 2u);
    CHECK(book.close(key));
    CHECK(book.chunks_held() == 0u);
    CHECK(book.rooms() == 0u);
    CHECK_FALSE(book.close(key));
  }
}
