// End-to-end KV checksums as pure functions: the digests a source computes
// over its rows equal the ones the destination computes over what the plan
// placed, at every TP mapping and prefix; one flipped byte is named by page
// and buffer.
#include <catch2/catch.hpp>

#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "actors/plan/kv_digest.hpp"
#include "actors/plan/planner.hpp"
#include "actors/plan/tp_mapping.hpp"

using namespace kvferry;

namespace {

/// A rank's layout (`heads` kv heads of the model, 0: MLA) with its buffers
/// in `mem`, one region per buffer numbered from `region`.
kv_layout rank(uint32_t heads, uint32_t tp_size, uint32_t tp, uint32_t page, uint32_t pages,
               uint32_t region, std::vector<std::vector<std::byte>>& mem) {
  kv_layout l;
  l.page_size = page;
  l.dtype = kv_dtype::bf16;
  l.mla = heads == 0;
  l.total_kv_heads = l.mla ? 1 : heads;
  l.kv_heads = l.mla ? 1 : heads_per_rank(heads, tp_size);
  l.head_dim = 4;
  l.tp_rank = tp;
  l.tp_size = tp_size;
  l.layer_ids = {0, 1};
  auto item = uint64_t{page} * l.token_bytes();
  auto n = l.mla ? 2u : 4u;
  for (uint32_t b = 0; b < n; ++b) {
    mem.emplace_back(item * pages);
    l.kv_buffers.push_back({region + b, 0, item * pages, item});
  }
  return l;
}

std::vector<std::byte*> bases(std::vector<std::vector<std::byte>>& mem) {
  std::vector<std::byte*> out;
  for (auto& m : mem)
    out.push_back(m.data());
  return out;
}

}  // namespace

TEST_CASE("kv digests: what the source hashes is what lands, at every mapping and prefix",
          "[logic][checksum]") {
  using cfg = std::tuple<uint32_t, uint32_t, uint32_t>;  // prefill tp, decode tp, heads
  auto [p, d, heads] = GENERATE(cfg{1, 1, 8}, cfg{2, 2, 8}, cfg{1, 4, 8}, cfg{4, 1, 2},
                                cfg{2, 8, 8}, cfg{1, 2, 0}, cfg{4, 1, 0});
  auto page = GENERATE(1u, 16u);
  CAPTURE(p, d, heads, page);
  std::mt19937 rng{p * 100 + d * 10 + heads + page};
  for (uint32_t dt = 0; dt < d; ++dt)
    for (auto& s : sources_of({p, 1}, {d, 1}, dt, 0, heads == 0, heads)) {
      if (s.dummy)
        continue;
      std::vector<std::vector<std::byte>> sm, dm;
      auto src = rank(heads, p, s.tp, page, 8, 1, sm);
      auto dst = rank(heads, d, dt, page, 8, 100, dm);
      for (auto& m : sm)
        for (auto& b : m)
          b = std::byte(rng());
      std::vector<uint32_t> sp{5, 2, 7}, dp{1, 6, 3};
      for (uint32_t skip : {0u, page / 2}) {
        CAPTURE(s.tp, dt, skip);
        auto plan = plan_kv(src, dst, sp, dp, 0, skip);
        REQUIRE(plan.ok());
        for (auto& op : plan->ops)
          std::memcpy(dm[op.remote - 100].data() + op.remote_offset,
                      sm[op.local - 1].data() + op.local_offset, op.length);
        auto sent = chunk_digests(src, dst, digest_side::source, bases(sm), sp, skip);
        auto landed = chunk_digests(src, dst, digest_side::destination, bases(dm), dp, skip);
        REQUIRE(sent.ok());
        REQUIRE(landed.ok());
        CHECK(sent->size() == geometry_of(src, dst)->pairs.size() * sp.size());
        CHECK(*sent == *landed);
        CHECK_FALSE(digest_mismatch(src, dst, *sent, *landed, dp, 4));

        // One byte of the second page's last buffer pair, written by this source.
        auto g = *geometry_of(src, dst);
        auto [sb, db] = g.pairs.back();
        auto at =
            uint64_t{dp[1]} * dst.kv_buffers[db].item_len + (page - 1) * g.dst_tok + g.dst_in_tok;
        dm[db][at] ^= std::byte{1};
        auto flipped = chunk_digests(src, dst, digest_side::destination, bases(dm), dp, skip);
        REQUIRE(flipped.ok());
        auto why = digest_mismatch(src, dst, *sent, *flipped, dp, 4);
        REQUIRE(why);
        CHECK_THAT(*why, Catch::StartsWith("page " + std::to_string(dp[1]) +
                                           " (page 5 of the room), buffer " + std::to_string(db)));
        CHECK_THAT(*why, Catch::Contains(" landed, the source sent "));
        dm[db][at] ^= std::byte{1};
      }
    }
}

TEST_CASE("kv digests: a held prefix is not hashed, missing digests and bad input are named",
          "[logic][checksum]") {
  std::vector<std::vector<std::byte>> sm, dm;
  auto src = rank(8, 1, 0, 16, 4, 1, sm);
  auto dst = rank(8, 1, 0, 16, 4, 100, dm);
  std::vector<uint32_t> pages{2};
  auto whole = chunk_digests(src, dst, digest_side::destination, bases(dm), pages, 0);
  auto held = chunk_digests(src, dst, digest_side::destination, bases(dm), pages, 3);
  REQUIRE(whole.ok());
  REQUIRE(held.ok());
  dm[0][2 * dst.kv_buffers[0].item_len] ^= std::byte{1};  // token 0 of page 2: held
  auto after = chunk_digests(src, dst, digest_side::destination, bases(dm), pages, 3);
  REQUIRE(after.ok());
  CHECK(*after == *held);

  CHECK(*digest_mismatch(src, dst, {}, *held, pages, 0) ==
        "0 digests from the source, expected 4 (1 page x 4 buffers)");
  auto out = chunk_digests(src, dst, digest_side::destination, bases(dm), std::vector{4u}, 0);
  REQUIRE_FALSE(out.ok());
  CHECK_THAT(out.error().message(), Catch::Contains("destination page 4 at position 0"));
  auto skip = chunk_digests(src, dst, digest_side::source, bases(sm), pages, 16);
  REQUIRE_FALSE(skip.ok());
  CHECK_THAT(skip.error().message(), Catch::Contains("expected fewer than the page size 16"));
  CHECK(checksum_named("xxh3") == kv_checksum::xxh3);
  CHECK(checksum_named("off") == kv_checksum::off);
  CHECK_FALSE(checksum_named("crc32"));
}
