// The TP and PP mapping: which prefill ranks feed a decode rank and which
// heads each one writes, checked against SGLang's own head-slice formula
// (§4.6) and against what a mapping must guarantee: every head of every
// decode rank written exactly once, every prefill rank taking part.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>

#include "actors/plan/tp_mapping.hpp"

using namespace kvferry;

namespace {

/// SGLang's send_kvcache_slice arithmetic, as the reference.
head_slice sglang_slice(uint32_t H, uint32_t p, uint32_t p_tp, uint32_t d, uint32_t d_tp) {
  auto src_heads = std::max(1u, H / p);
  auto dst_heads = std::max(1u, H / d);
  if (p > d) {
    auto src_rep = std::max(1u, p / H);
    auto uniq = p_tp / src_rep;
    return {0, (uniq * src_heads) % dst_heads, src_heads};
  }
  auto dst_rep = std::max(1u, d / H);
  auto uniq_dst = d_tp / dst_rep;  // integer division, not modulo
  return {(uniq_dst * dst_heads) % src_heads, 0, dst_heads};
}

const std::vector<std::pair<uint32_t, uint32_t>> tp_matrix{{1, 1}, {2, 2}, {1, 2}, {2, 1},
                                                           {1, 4}, {4, 1}, {2, 8}, {8, 2}};

}  // namespace

TEST_CASE("heads: a share each - or one replicated head with fewer heads than ranks",
          "[logic][mapping]") {
  CHECK(heads_of(8, 2, 1, false).first == 4);
  CHECK(heads_of(8, 2, 1, false).count == 4);
  CHECK(heads_of(2, 8, 5, false).first == 1);  // 5 / (8/2) = 1, not 5 % 2
  CHECK(heads_of(2, 8, 5, false).count == 1);
  CHECK(heads_of(1, 4, 3, true).first == 0);
}

TEST_CASE("slices match SGLang's formula for every mapped pair", "[logic][mapping]") {
  for (auto [p, d] : tp_matrix)
    for (uint32_t H : {1u, 2u, 4u, 8u, 16u}) {
      if ((H % p && p % H) || (H % d && d % H))
        continue;
      for (uint32_t r = 0; r < d; ++r)
        for (auto& s : sources_of({p, 1}, {d, 1}, r, 0, false, H)) {
          CAPTURE(p, d, H, r, s.tp);
          auto ours = slice_of(H, p, s.tp, d, r, false);
          auto ref = sglang_slice(H, p, s.tp, d, r);
          CHECK(ours.n_heads == ref.n_heads);
          CHECK(ours.src_head_start == ref.src_head_start);
          CHECK(ours.dst_head_start == ref.dst_head_start);
        }
    }
}

TEST_CASE("every decode head is written once - every prefill rank takes part", "[logic][mapping]") {
  for (auto [p, d] : tp_matrix)
    for (uint32_t H : {2u, 8u, 0u}) {  // 0: MLA
      bool mla = H == 0;
      CAPTURE(p, d, H);
      std::set<uint32_t> participating;
      uint32_t total_sources = 0;
      for (uint32_t r = 0; r < d; ++r) {
        auto srcs = sources_of({p, 1}, {d, 1}, r, 0, mla, H);
        total_sources += static_cast<uint32_t>(srcs.size());
        auto mine = heads_of(H, d, r, mla);
        std::vector<uint32_t> written(mine.count, 0);
        uint32_t aux_writers = 0;
        for (auto& s : srcs) {
          participating.insert(s.tp);
          aux_writers += s.writes_aux ? 1 : 0;
          if (s.dummy)
            continue;
          auto sl = slice_of(H, p, s.tp, d, r, mla);
          REQUIRE(sl.n_heads > 0);
          for (uint32_t h = 0; h < sl.n_heads; ++h)
            ++written.at(sl.dst_head_start + h);
        }
        CHECK(aux_writers == 1);
        for (auto w : written)
          CHECK(w == 1);
      }
      CHECK(participating.size() == p);
      uint32_t demanded = 0;
      for (uint32_t t = 0; t < p; ++t)
        demanded += destinations_of({p, 1}, {d, 1}, t, 0, mla, H);
      CHECK(demanded == total_sources);
    }
}

TEST_CASE("fan-in with MLA: one writer - the others are dummies", "[logic][mapping]") {
  auto s = sources_of({4, 1}, {1, 1}, 0, 0, true, 1);
  REQUIRE(s.size() == 4);
  CHECK_FALSE(s[0].dummy);
  CHECK(s[0].writes_aux);
  CHECK(s[1].dummy);
  CHECK(s[3].dummy);
  CHECK(destinations_of({4, 1}, {1, 1}, 2, 0, true, 1) == 1);
}

TEST_CASE("fan-out: a prefill rank waits for every decode rank it serves", "[logic][mapping]") {
  CHECK(destinations_of({2, 1}, {8, 1}, 1, 0, false, 8) == 4);
  auto s = sources_of({2, 1}, {8, 1}, 5, 0, false, 8);
  REQUIRE(s.size() == 1);
  CHECK(s[0].tp == 1);
}

TEST_CASE("PP: equal stages pair - decode PP 1 reads every prefill stage", "[logic][mapping]") {
  auto eq = sources_of({2, 2}, {2, 2}, 1, 1, false, 8);
  REQUIRE(eq.size() == 1);
  CHECK(eq[0].pp == 1);
  auto all = sources_of({2, 2}, {2, 1}, 1, 0, false, 8);
  REQUIRE(all.size() == 2);
  CHECK(all[0].pp == 0);
  CHECK(all[1].pp == 1);
  CHECK_FALSE(all[0].writes_aux);
  CHECK(all[1].writes_aux);  // the output token comes from the last stage
}

TEST_CASE("shapes that cannot pair are refused - naming both sizes", "[logic][mapping]") {
  CHECK(*check_sizes({3, 1}, {2, 1}) ==
        "prefill TP 3 with decode TP 2: one TP size must divide the other");
  CHECK(*check_sizes({1, 2}, {1, 3}) ==
        "decode PP 3 with prefill PP 2: decode PP must equal prefill PP or be 1");
  CHECK_FALSE(check_sizes({8, 4}, {2, 1}));
}

TEST_CASE("sizes beyond the caps are refused before any mapping loops over them",
          "[logic][mapping]") {
  // A peer's topology with TP near 2^32 would make sources_of() and
  // destinations_of() loop ~4e9 times.
  auto bad = check_sizes({UINT32_MAX, 1}, {1, 1});
  REQUIRE(bad);
  CHECK_THAT(*bad, Catch::StartsWith("prefill TP 4294967295 x PP 1 out of range, expected TP at "
                                     "most 1024, PP at most 1024 and at most 4096 ranks"));
  bad = check_sizes({1, 1}, {1, max_pp_size + 1});
  REQUIRE(bad);
  CHECK_THAT(*bad, Catch::StartsWith("decode TP 1 x PP 1025 out of range"));
  bad = check_sizes({1024, 8}, {1024, 8});
  REQUIRE(bad);
  CHECK_THAT(*bad, Catch::StartsWith("prefill TP 1024 x PP 8 out of range"));
  // The largest fan-in within the caps: one decode rank, 1024 x 4 prefill ranks.
  CHECK_FALSE(check_sizes({max_tp_size, 4}, {1, 1}));
  auto all = sources_of({max_tp_size, 4}, {1, 1}, 0, 0, true, 1);
  CHECK(all.size() == 4096);
  CHECK(std::count_if(all.begin(), all.end(), [](auto& s) { return !s.dummy; }) == 4);
  CHECK(destinations_of({max_tp_size, 4}, {1, 1}, 1023, 3, true, 1) == 1);
}

namespace {

kv_layout layout(uint32_t tp, uint32_t tp_size, std::vector<uint32_t> layers, uint32_t pp = 0,
                 uint32_t pp_size = 1) {
  kv_layout l;
  l.page_size = 4;
  l.dtype = kv_dtype::bf16;
  l.layer_ids = std::move(layers);
  l.total_kv_heads = 8;
  l.kv_heads = 8 / tp_size;
  l.head_dim = 16;
  l.tp_rank = tp;
  l.tp_size = tp_size;
  l.pp_rank = pp;
  l.pp_size = pp_size;
  auto item = uint64_t{4} * l.kv_heads * 16 * 2;
  for (size_t i = 0; i < 2 * l.layer_ids.size(); ++i)
    l.kv_buffers.push_back({static_cast<uint32_t>(i + 1), 0, item * 8, item});
  return l;
}

}  // namespace

TEST_CASE("pairing checks layers and state components at handshake", "[logic][mapping]") {
  CHECK_FALSE(check_pairing(layout(1, 2, {0, 1}), layout(0, 1, {0, 1})));
  CHECK_FALSE(check_pairing(layout(0, 2, {2, 3}, 1, 2), layout(0, 1, {0, 1, 2, 3})));
  auto bad = check_pairing(layout(0, 2, {2, 3}, 1, 2), layout(0, 1, {0, 1}));
  REQUIRE(bad);
  CHECK(bad->code == errc::layout_mismatch);
  CHECK(bad->cause ==
        "layout mismatch: layer 2 of prefill tp0 pp1 is not among the decode rank's layers [0,1]");
  bad = check_pairing(layout(0, 1, {0, 1}), layout(0, 1, {0, 1, 2}));
  REQUIRE(bad);
  CHECK(bad->cause == "layout mismatch: layer_ids prefill=[0,1] decode=[0,1,2]");
  auto with_state = [](kv_layout l) {
    l.states = {{state_kind::single_slot, {{50, 0, 4096, 64}}}};
    return l;
  };
  bad = check_pairing(with_state(layout(0, 2, {0})), with_state(layout(0, 1, {0})));
  REQUIRE(bad);
  CHECK(bad->code == errc::unsupported);
  CHECK_THAT(bad->cause, Catch::Contains("state components need equal TP and PP"));
  CHECK_FALSE(check_pairing(with_state(layout(1, 2, {0})), with_state(layout(1, 2, {0}))));
  bad = check_pairing(layout(0, 3, {0}), layout(0, 2, {0}));
  REQUIRE(bad);
  CHECK(bad->code == errc::unsupported);
}

TEST_CASE("pairing refuses a malformed decode layout naming what is wrong", "[logic][mapping]") {
  // A peer's layout with fewer KV buffers than its layers need: refused, not
  // indexed (the registration is refused; the rank's other rooms carry on).
  auto d = layout(0, 1, {0, 1});
  d.kv_buffers.pop_back();
  auto bad = check_pairing(layout(0, 1, {0, 1}), d);
  REQUIRE(bad);
  CHECK(bad->code == errc::invalid_argument);
  CHECK(bad->cause == "the decode rank's layout: 3 kv buffers, expected 4 (2 layers x K,V)");
}
