// The planner against a naive reference: copy page by page, buffer by buffer,
// and compare the bytes the plan moves with the bytes the reference moves.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <random>

#include "actors/plan/planner.hpp"
#include "actors/plan/tp_mapping.hpp"

using namespace kvferry;

namespace {

/// Memory behind a layout: one vector per region id.
struct memory {
  std::map<uint32_t, std::vector<std::byte>> regions;

  kv_layout layout(uint32_t page_size, uint32_t layers, bool mla, uint32_t pages,
                   uint32_t region_base, uint64_t offset) {
    kv_layout l;
    l.page_size = page_size;
    l.dtype = kv_dtype::f16;
    for (uint32_t i = 0; i < layers; ++i)
      l.layer_ids.push_back(i);
    l.kv_heads = mla ? 1 : 2;
    l.total_kv_heads = l.kv_heads;
    l.head_dim = 4;
    l.mla = mla;
    auto item = uint64_t{page_size} * l.kv_heads * l.head_dim * 2;
    auto n = mla ? layers : 2 * layers;
    for (uint32_t b = 0; b < n; ++b) {
      auto id = region_base + b;
      regions[id].assign(offset + item * pages, std::byte{0});
      l.kv_buffers.push_back({id, offset, item * pages, item});
    }
    regions[region_base + 100].assign(64 * 8, std::byte{0});
    l.aux_buffers.push_back({region_base + 100, 0, 64 * 8, 64});
    return l;
  }

  /// A rank of a TP x PP instance of a model with `heads` kv heads (0: MLA)
  /// over `layers` layers; the rank holds its stage's layers.
  kv_layout rank(uint32_t page_size, uint32_t heads, uint32_t tp, uint32_t tp_size, uint32_t pp,
                 uint32_t pp_size, uint32_t layers, uint32_t pages, uint32_t region_base) {
    kv_layout l;
    l.page_size = page_size;
    l.dtype = kv_dtype::f16;
    l.mla = heads == 0;
    l.total_kv_heads = l.mla ? 1 : heads;
    l.kv_heads = l.mla ? 1 : heads_per_rank(heads, tp_size);
    l.head_dim = 4;
    l.tp_rank = tp;
    l.tp_size = tp_size;
    l.pp_rank = pp;
    l.pp_size = pp_size;
    for (uint32_t i = pp * layers / pp_size; i < (pp + 1) * layers / pp_size; ++i)
      l.layer_ids.push_back(i);
    auto item = uint64_t{page_size} * l.kv_heads * l.head_dim * 2;
    auto n = l.mla ? l.layer_ids.size() : 2 * l.layer_ids.size();
    for (uint32_t b = 0; b < n; ++b) {
      auto id = region_base + b;
      regions[id].assign(item * pages, std::byte{0});
      l.kv_buffers.push_back({id, 0, item * pages, item});
    }
    return l;
  }

  void apply(const memory& src, const write_plan& plan) {
    for (auto& op : plan.ops) {
      auto& s = src.regions.at(op.local);
      auto& d = regions.at(op.remote);
      REQUIRE(op.local_offset + op.length <= s.size());
      REQUIRE(op.remote_offset + op.length <= d.size());
      std::memcpy(d.data() + op.remote_offset, s.data() + op.local_offset, op.length);
    }
  }
};

void randomize(memory& m, std::mt19937& rng) {
  for (auto& [id, v] : m.regions)
    for (auto& b : v)
      b = std::byte(rng());
}

/// The reference: every page of every buffer on its own.
void reference_copy(const memory& src, memory& dst, const kv_layout& sl, const kv_layout& dl,
                    const std::vector<uint32_t>& sp, const std::vector<uint32_t>& dp) {
  for (size_t b = 0; b < sl.kv_buffers.size(); ++b)
    for (size_t i = 0; i < sp.size(); ++i) {
      auto& s = sl.kv_buffers[b];
      auto& d = dl.kv_buffers[b];
      std::memcpy(dst.regions.at(d.region).data() + d.offset + dp[i] * d.item_len,
                  src.regions.at(s.region).data() + s.offset + sp[i] * s.item_len, s.item_len);
    }
}

/// The per-token reference: for every layer the source holds, every page,
/// every token and every head both ranks hold, copy that head's bytes.
void per_token_copy(const memory& src, memory& dst, const kv_layout& sl, const kv_layout& dl,
                    const std::vector<uint32_t>& sp, const std::vector<uint32_t>& dp) {
  auto sh = heads_of(sl.total_kv_heads, sl.tp_size, sl.tp_rank, sl.mla);
  auto dh = heads_of(dl.total_kv_heads, dl.tp_size, dl.tp_rank, dl.mla);
  uint64_t head_bytes = sl.head_dim * 2;
  for (auto layer : sl.layer_ids)
    for (bool value : {false, true}) {
      if (value && sl.mla)
        continue;
      auto& s = sl.kv_buffers[static_cast<size_t>(sl.buffer_of(layer, value))];
      auto& d = dl.kv_buffers[static_cast<size_t>(dl.buffer_of(layer, value))];
      for (size_t i = 0; i < sp.size(); ++i)
        for (uint32_t t = 0; t < sl.page_size; ++t)
          for (uint32_t h = 0; h < sl.total_kv_heads; ++h) {
            if (h < sh.first || h >= sh.first + sh.count || h < dh.first ||
                h >= dh.first + dh.count)
              continue;
            auto src_off =
                s.offset + sp[i] * s.item_len + t * sl.token_bytes() + (h - sh.first) * head_bytes;
            auto dst_off =
                d.offset + dp[i] * d.item_len + t * dl.token_bytes() + (h - dh.first) * head_bytes;
            std::memcpy(dst.regions.at(d.region).data() + dst_off,
                        src.regions.at(s.region).data() + src_off, head_bytes);
          }
    }
}

}  // namespace

TEST_CASE("head slices and PP stages move exactly the bytes of the per-token reference",
          "[logic][planner]") {
  using cfg =
      std::tuple<uint32_t, uint32_t, uint32_t, uint32_t, uint32_t>;  // p, d, heads, pp_p, page
  auto c = GENERATE(cfg{1, 2, 8, 1, 4}, cfg{2, 1, 8, 1, 4}, cfg{1, 4, 2, 1, 1}, cfg{4, 1, 2, 1, 16},
                    cfg{2, 8, 8, 1, 4}, cfg{8, 2, 8, 1, 1}, cfg{8, 2, 2, 1, 4}, cfg{2, 2, 8, 2, 4},
                    cfg{4, 2, 0, 1, 4}, cfg{1, 4, 0, 2, 4});
  auto [p, d, heads, pp, page] = c;
  CAPTURE(p, d, heads, pp, page);
  std::mt19937 rng{p * 100 + d * 10 + heads + pp};
  uint32_t writes = 0, sliced_pairs = 0;
  for (uint32_t stage = 0; stage < pp; ++stage)
    for (uint32_t r = 0; r < d; ++r)
      for (auto& src : sources_of({p, pp}, {d, 1}, r, 0, heads == 0, heads)) {
        if (src.dummy || src.pp != stage)
          continue;
        memory sm, dm, ref;
        auto sl = sm.rank(page, heads, src.tp, p, stage, pp, 4, 12, 1);
        auto dl = dm.rank(page, heads, r, d, 0, 1, 4, 10, 500);
        ref.rank(page, heads, r, d, 0, 1, 4, 10, 500);
        randomize(sm, rng);
        randomize(dm, rng);
        ref.regions = dm.regions;
        std::vector<uint32_t> sp(12), dp(10);
        std::iota(sp.begin(), sp.end(), 0u);
        std::iota(dp.begin(), dp.end(), 0u);
        std::shuffle(sp.begin(), sp.end(), rng);
        std::shuffle(dp.begin(), dp.end(), rng);
        sp.resize(7);
        dp.resize(7);
        auto plan = plan_kv(sl, dl, sp, dp);
        REQUIRE(plan.ok());
        dm.apply(sm, *plan);
        per_token_copy(sm, ref, sl, dl, sp, dp);
        CHECK(dm.regions == ref.regions);
        writes += static_cast<uint32_t>(plan->ops.size());
        sliced_pairs += sl.token_bytes() != dl.token_bytes() ? 1 : 0;
      }
  CHECK(writes > 0);
  INFO("writes: " << writes << " over " << sliced_pairs << " sliced pairs");
}

TEST_CASE("prefix reuse: the first page's held tokens are not written, the rest are",
          "[logic][planner][prefix]") {
  using cfg = std::tuple<uint32_t, uint32_t, uint32_t, uint32_t>;  // p, d, heads, page
  auto c = GENERATE(cfg{1, 1, 8, 4}, cfg{2, 2, 8, 16}, cfg{1, 2, 8, 4}, cfg{4, 1, 2, 16},
                    cfg{2, 8, 8, 4}, cfg{1, 1, 0, 16}, cfg{4, 2, 0, 4});
  auto [p, d, heads, page] = c;
  auto max_write = GENERATE(uint64_t{0}, uint64_t{24});
  CAPTURE(p, d, heads, page, max_write);
  std::mt19937 rng{p * 100 + d * 10 + heads + page};
  for (uint32_t skip = 0; skip < page; ++skip)
    for (auto& src : sources_of({p, 1}, {d, 1}, 0, 0, heads == 0, heads)) {
      if (src.dummy)
        continue;
      CAPTURE(skip, src.tp);
      memory sm, dm, ref;
      auto sl = sm.rank(page, heads, src.tp, p, 0, 1, 2, 6, 1);
      auto dl = dm.rank(page, heads, 0, d, 0, 1, 2, 6, 500);
      ref.rank(page, heads, 0, d, 0, 1, 2, 6, 500);
      randomize(sm, rng);
      randomize(dm, rng);
      ref.regions = dm.regions;
      auto original = dm.regions;
      std::vector<uint32_t> sp{4, 1, 2}, dp{3, 5, 0};
      auto plan = plan_kv(sl, dl, sp, dp, max_write, skip);
      REQUIRE(plan.ok());
      dm.apply(sm, *plan);
      per_token_copy(sm, ref, sl, dl, sp, dp);
      // What decode held stays: the first `skip` token rows of the first page.
      for (auto& b : dl.kv_buffers) {
        auto at = static_cast<long>(b.offset + dp[0] * b.item_len);
        auto len = static_cast<long>(skip * dl.token_bytes());
        std::copy_n(original.at(b.region).begin() + at, len, ref.regions.at(b.region).begin() + at);
      }
      CHECK(dm.regions == ref.regions);
      uint64_t written = 0;
      for (auto& op : plan->ops)
        written += op.length;
      CHECK(written == plan->bytes);
    }
  memory sm, dm;
  auto sl = sm.rank(page, heads, 0, p, 0, 1, 2, 6, 1);
  auto dl = dm.rank(page, heads, 0, d, 0, 1, 2, 6, 500);
  auto whole_page = plan_kv(sl, dl, std::vector<uint32_t>{1}, std::vector<uint32_t>{1}, 0, page);
  REQUIRE_FALSE(whole_page.ok());
  CHECK_THAT(whole_page.error().message(),
             Catch::Contains("a skip of " + std::to_string(page) +
                             " tokens of the first page, expected fewer than the page size"));
}

TEST_CASE("with different heads per rank a page becomes one write per token", "[logic][planner]") {
  memory sm, dm;
  auto sl = sm.rank(16, 8, 1, 2, 0, 1, 2, 8, 1);    // prefill tp1 of 2: heads 4..7
  auto dl = dm.rank(16, 8, 1, 4, 0, 1, 2, 8, 100);  // decode tp1 of 4: heads 2..3
  auto plan = plan_kv(sl, dl, std::vector<uint32_t>{0, 1}, std::vector<uint32_t>{2, 3});
  // Prefill tp1 holds heads 4..7, decode tp1 holds heads 2..3: nothing shared.
  REQUIRE_FALSE(plan.ok());
  CHECK_THAT(plan.error().message(),
             Catch::Contains("holds heads [4,8)") && Catch::Contains("holds heads [2,4)"));
  auto dl2 = dm.rank(16, 8, 2, 4, 0, 1, 2, 8, 200);  // decode tp2 of 4: heads 4..5
  plan = plan_kv(sl, dl2, std::vector<uint32_t>{0, 1}, std::vector<uint32_t>{2, 3});
  REQUIRE(plan.ok());
  CHECK(plan->ops.size() == 2 * 2 * 2 * 16);         // 2 layers x K,V x 2 pages x 16 tokens
  CHECK(plan->bytes == 2 * 2 * 2 * 16 * 2 * 4 * 2);  // ... x 2 heads x 4 elements x 2 B
}

TEST_CASE("state components: one slot or as many pages on each side", "[logic][planner]") {
  memory sm, dm;
  auto sl = sm.layout(16, 1, true, 8, 1, 0);
  auto dl = dm.layout(16, 1, true, 8, 50, 0);
  sl.states = {{state_kind::single_slot, {{300, 0, 128 * 4, 128}}},
               {state_kind::page_indexed, {{301, 0, 64 * 8, 64}}}};
  dl.states = {{state_kind::single_slot, {{400, 0, 128 * 4, 128}}},
               {state_kind::page_indexed, {{401, 0, 64 * 8, 64}}}};
  write_plan plan;
  REQUIRE(plan_states(plan, sl, dl, {{2}, {1, 2, 3}}, {{0}, {5, 6, 7}}).ok());
  REQUIRE(plan.ops.size() == 2);  // one slot; three consecutive pages merged
  CHECK(plan.ops[0].local_offset == 2 * 128);
  CHECK(plan.ops[1].remote_offset == 5 * 64);
  CHECK(plan.ops[1].length == 3 * 64);
  CHECK_THAT(plan_states(plan, sl, dl, {{2}, {1, 2}}, {{0}, {5}}).message(),
             Catch::Contains("2 source indices against 1 destination indices"));
  CHECK_THAT(plan_states(plan, sl, dl, {{2, 3}, {}}, {{0}, {}}).message(),
             Catch::Contains("expected one on each side"));
  CHECK_THAT(plan_states(plan, sl, dl, {{4}, {}}, {{0}, {}}).message(),
             Catch::Contains("index 4 on the source side out of range"));
}

TEST_CASE("consecutive pages merge into one write per buffer", "[logic][planner]") {
  memory sm, dm;
  auto sl = sm.layout(16, 3, false, 64, 1, 0);
  auto dl = dm.layout(16, 3, false, 64, 200, 128);
  auto plan =
      plan_kv(sl, dl, std::vector<uint32_t>{4, 5, 6, 7}, std::vector<uint32_t>{10, 11, 12, 13});
  REQUIRE(plan.ok());
  CHECK(plan->ops.size() == 6);  // one per buffer: 3 layers x K,V
  CHECK(plan->bytes == 6 * 4 * sl.kv_buffers[0].item_len);
  auto& op = plan->ops[0];
  CHECK(op.local_offset == 4 * sl.kv_buffers[0].item_len);
  CHECK(op.remote_offset == 128 + 10 * dl.kv_buffers[0].item_len);
  CHECK(op.length == 4 * sl.kv_buffers[0].item_len);

  // A break on either side splits the run.
  plan = plan_kv(sl, dl, std::vector<uint32_t>{4, 5, 9, 10}, std::vector<uint32_t>{1, 2, 3, 4});
  REQUIRE(plan.ok());
  CHECK(plan->ops.size() == 12);
  plan = plan_kv(sl, dl, std::vector<uint32_t>{4, 5, 6}, std::vector<uint32_t>{1, 3, 4});
  REQUIRE(plan.ok());
  CHECK(plan->ops.size() == 12);
}

TEST_CASE("the plan moves exactly the bytes of the page-by-page reference", "[logic][planner]") {
  auto page_size = GENERATE(1u, 16u, 64u);
  auto mla = GENERATE(false, true);
  std::mt19937 rng{page_size * 2 + mla};
  for (int round = 0; round < 20; ++round) {
    memory sm, dm, ref;
    auto sl = sm.layout(page_size, 3, mla, 48, 1, 0);
    auto dl = dm.layout(page_size, 3, mla, 40, 300, 64);
    ref.layout(page_size, 3, mla, 40, 300, 64);
    randomize(sm, rng);
    randomize(dm, rng);
    ref.regions = dm.regions;
    std::uniform_int_distribution<uint32_t> count(0, 40);
    auto n = count(rng);
    std::vector<uint32_t> sp(48), dp(40);
    std::iota(sp.begin(), sp.end(), 0);
    std::iota(dp.begin(), dp.end(), 0);
    std::shuffle(sp.begin(), sp.end(), rng);
    std::shuffle(dp.begin(), dp.end(), rng);
    // Some runs of consecutive pages, as real allocators hand them out.
    if (round % 2 == 0) {
      std::sort(sp.begin(), sp.begin() + n / 2);
      std::sort(dp.begin(), dp.begin() + n / 2);
    }
    sp.resize(n);
    dp.resize(n);
    auto plan = plan_kv(sl, dl, sp, dp);
    REQUIRE(plan.ok());
    CHECK(plan->bytes == uint64_t{n} * sl.kv_buffers[0].item_len * sl.kv_buffers.size());
    CHECK(plan->ops.size() <= uint64_t{n} * sl.kv_buffers.size());
    dm.apply(sm, *plan);
    reference_copy(sm, ref, sl, dl, sp, dp);
    CHECK(dm.regions == ref.regions);
  }
}

TEST_CASE("the planner refuses inconsistent input instead of truncating", "[logic][planner]") {
  memory sm, dm;
  auto sl = sm.layout(16, 2, false, 8, 1, 0);
  auto dl = dm.layout(16, 2, false, 4, 50, 0);
  auto more_src = plan_kv(sl, dl, std::vector<uint32_t>{1, 2, 3}, std::vector<uint32_t>{1, 2});
  REQUIRE_FALSE(more_src.ok());
  CHECK_THAT(more_src.error().message(),
             Catch::Contains("3 source pages against 2 destination pages"));
  auto dst_range = plan_kv(sl, dl, std::vector<uint32_t>{1}, std::vector<uint32_t>{4});
  REQUIRE_FALSE(dst_range.ok());
  CHECK_THAT(
      dst_range.error().message(),
      Catch::Contains("destination page 4 at position 0 out of range, the pool holds 4 pages"));
  auto src_range = plan_kv(sl, dl, std::vector<uint32_t>{8}, std::vector<uint32_t>{0});
  REQUIRE_FALSE(src_range.ok());
  CHECK_THAT(src_range.error().message(), Catch::Contains("source page 8"));
}

TEST_CASE("long writes are split at the backend's limit", "[logic][planner]") {
  memory sm, dm;
  auto sl = sm.layout(16, 1, true, 8, 1, 0);
  auto dl = dm.layout(16, 1, true, 8, 50, 0);
  auto item = sl.kv_buffers[0].item_len;
  auto plan = plan_kv(sl, dl, std::vector<uint32_t>{0, 1, 2, 3}, std::vector<uint32_t>{4, 5, 6, 7},
                      item + 10);
  REQUIRE(plan.ok());
  CHECK(plan->bytes == 4 * item);
  for (auto& op : plan->ops)
    CHECK(op.length <= item + 10);
  CHECK(plan->ops.size() == 4);
}

TEST_CASE("aux rows plan one write per aux buffer and are range-checked", "[logic][planner]") {
  memory sm, dm;
  auto sl = sm.layout(16, 1, true, 8, 1, 0);
  auto dl = dm.layout(16, 1, true, 8, 50, 0);
  write_plan plan;
  REQUIRE(plan_aux(plan, sl, dl, 2, 5).ok());
  REQUIRE(plan.ops.size() == 1);
  CHECK(plan.ops[0].local_offset == 2 * 64);
  CHECK(plan.ops[0].remote_offset == 5 * 64);
  CHECK(plan.ops[0].length == 64);
  auto bad = plan_aux(plan, sl, dl, 2, 8);
  CHECK_THAT(bad.message(), Catch::Contains("destination aux row 8 out of range"));
}
