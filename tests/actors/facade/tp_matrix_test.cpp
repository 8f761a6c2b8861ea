// Byte-exact across TP and PP mappings, in one process: every rank of both
// instances concludes Success, and every decode rank holds exactly the heads
// and layers it should, for TP 1→1, 2→2, 1→2, 2→1, 1→4, 4→1, 2→8, 8→2, MHA
// with 8 and 2 kv heads and MLA, page sizes 1, 16 and 64, and PP 2→1 and
// 2→2; random page orders, chunked sends. With prefix reuse (the decode
// ranks hold a room's first tokens, a partial page included): the same
// mappings, sliced and staged, move exactly the tokens after the prefix and
// leave the held ones as they were. With DP: the attention-TP mappings of DP
// shapes (TP 8 DP 8 -> TP 16 DP 16, DP 1 -> DP 4, ...), the prefill group
// registered behind the instance's one bootstrap.
#include "tests/support/instance_fixture.hpp"

#include <algorithm>
#include <numeric>
#include <random>

#include "actors/plan/dp_groups.hpp"

using namespace kvferry;
using namespace kvferry::test;

namespace {

struct matrix_case {
  uint32_t p_tp, p_pp, d_tp, d_pp;
};

/// The tokens decode holds of room `id` (0 without reuse): whole pages and
/// a part of the next, varied by room.
uint32_t prefix_of(uint64_t id, uint32_t page, bool reuse) {
  return reuse ? static_cast<uint32_t>(page * id + (id * 5) % page) : 0;
}

/// The pattern the held tokens of a room's first page carry (another room's).
constexpr uint64_t held_marker = 1000;

void run_case(instance_fixture& f, const matrix_case& c, uint32_t page, uint32_t heads,
              bool reuse = false) {
  f.shape = heads == 0 ? apps::model_shape{"mla", 4, 1, 16, kv_dtype::bf16, true}
                       : apps::model_shape{"mha", 4, heads, 8, kv_dtype::bf16, false};
  f.page_size = page;
  f.start(c.p_tp, c.p_pp, c.d_tp, c.d_pp);
  std::mt19937 rng{page * 1000 + heads * 100 + c.p_tp * 10 + c.d_tp + c.p_pp};
  std::vector<uint32_t> free_src(f.pool_pages), free_dst(f.pool_pages);
  std::iota(free_src.begin(), free_src.end(), 0u);
  std::iota(free_dst.begin(), free_dst.end(), 0u);
  std::shuffle(free_src.begin(), free_src.end(), rng);
  std::shuffle(free_dst.begin(), free_dst.end(), rng);
  struct planned {
    uint64_t id;
    std::vector<uint32_t> src, dst;
    uint32_t aux;
  };
  std::vector<planned> rooms;
  std::vector<instance_fixture::room_handles> handles;
  uint32_t used = 0;
  for (uint64_t id = 1; id <= 4; ++id) {
    auto n = std::uniform_int_distribution<uint32_t>(1, 5)(rng);
    planned r{id, {}, {}, static_cast<uint32_t>(id)};
    for (uint32_t j = 0; j < n; ++j, ++used) {
      r.src.push_back(free_src[used]);
      r.dst.push_back(free_dst[used]);
    }
    for (auto& d : f.decode)  // what decode held before: another pattern
      d.pool->fill_room(f.seed, id + held_marker, {r.dst.front()}, no_aux_slot);
    handles.push_back(
        f.open_room(id, r.src, r.dst, r.aux, r.aux, id % 3, prefix_of(id, page, reuse)));
    rooms.push_back(std::move(r));
  }
  f.sched.run();
  for (size_t i = 0; i < rooms.size(); ++i) {
    auto id = rooms[i].id;
    auto prefix = prefix_of(id, page, reuse);
    auto skip = prefix % page;
    CAPTURE(id, prefix);
    for (auto& s : handles[i].senders) {
      CHECK(s.poll() == kv_poll::success);
      CHECK(s.decode_prefix_tokens() == prefix);
    }
    for (size_t k = 0; k < f.decode.size(); ++k) {
      CAPTURE(k);
      auto& pool = *f.decode[k].pool;
      CHECK(handles[i].receivers[k].poll() == kv_poll::success);
      CHECK(pool.holds_room(f.seed, id, rooms[i].dst, rooms[i].aux, skip));
      // The held tokens are as they were; without reuse they were written.
      CHECK(pool.holds_tokens(f.seed, id + held_marker, rooms[i].dst.front(), 0, 0, skip));
      if (skip == 0)
        CHECK_FALSE(pool.holds_tokens(f.seed, id + held_marker, rooms[i].dst.front(), 0, 0, 1));
    }
  }
}

}  // namespace

TEST_CASE_METHOD(instance_fixture, "TP mappings move every byte of every rank", "[actors][tp]") {
  auto c = GENERATE(matrix_case{1, 1, 1, 1}, matrix_case{2, 1, 2, 1}, matrix_case{1, 1, 2, 1},
                    matrix_case{2, 1, 1, 1}, matrix_case{1, 1, 4, 1}, matrix_case{4, 1, 1, 1},
                    matrix_case{2, 1, 8, 1}, matrix_case{8, 1, 2, 1});
  auto heads = GENERATE(8u, 2u, 0u);  // 0: MLA
  auto page = GENERATE(1u, 16u, 64u);
  CAPTURE(c.p_tp, c.d_tp, heads, page);
  run_case(*this, c, page, heads);
}

TEST_CASE_METHOD(instance_fixture, "PP mappings: every prefill stage writes its own layers",
                 "[actors][tp]") {
  auto c = GENERATE(matrix_case{1, 2, 1, 1}, matrix_case{2, 2, 1, 1}, matrix_case{1, 2, 2, 1},
                    matrix_case{2, 2, 2, 2}, matrix_case{2, 2, 4, 2});
  auto heads = GENERATE(8u, 0u);
  CAPTURE(c.p_tp, c.p_pp, c.d_tp, c.d_pp, heads);
  run_case(*this, c, 16, heads);
}

TEST_CASE_METHOD(instance_fixture,
                 "prefix reuse: only the tokens after decode's prefix move, sliced or staged",
                 "[actors][tp][prefix]") {
  auto c = GENERATE(matrix_case{1, 1, 1, 1}, matrix_case{2, 1, 2, 1}, matrix_case{1, 1, 2, 1},
                    matrix_case{4, 1, 1, 1}, matrix_case{2, 1, 8, 1}, matrix_case{2, 2, 2, 1});
  auto heads = GENERATE(8u, 2u, 0u);  // 0: MLA
  auto page = GENERATE(1u, 16u, 64u);
  staging.enabled = GENERATE(true, false);
  checksum = GENERATE(kv_checksum::off, kv_checksum::xxh3);  // the digests skip the held tokens
  CAPTURE(c.p_tp, c.p_pp, c.d_tp, heads, page, staging.enabled, to_string(checksum));
  run_case(*this, c, page, heads, true);
}

TEST_CASE_METHOD(instance_fixture,
                 "DP shapes: a room between two DP groups moves every byte, the prefill group "
                 "behind the instance's one bootstrap",
                 "[actors][tp][dp]") {
  struct dp_case {
    dp_shape prefill, decode;
    uint32_t group;  ///< the prefill group that serves the rooms
  };
  auto c = GENERATE(dp_case{{8, 8}, {16, 16}, 5}, dp_case{{4, 1}, {8, 4}, 0},
                    dp_case{{8, 2}, {4, 4}, 1}, dp_case{{4, 4}, {2, 2}, 3});
  auto heads = GENERATE(8u, 2u, 0u);  // 0: MLA
  CAPTURE(c.prefill.tp, c.prefill.dp, c.decode.tp, c.decode.dp, c.group, heads);
  REQUIRE_FALSE(check_dp_pair(c.prefill, 1, c.decode, 1));
  if (c.prefill.dp > 1) {
    dp_group = c.group;
    dp_size = c.prefill.dp;
  }
  // A DP group is an instance of its attention-TP ranks to the runtime.
  run_case(*this, matrix_case{c.prefill.attn_tp(), 1, c.decode.attn_tp(), 1}, 16, heads);
  if (c.prefill.dp > 1)
    for (auto& p : prefill)
      CHECK(state_of<prefill_rank_state>(p.rt->prefill()).cfg.self.instance ==
            "prefill-0/dp" + std::to_string(c.group));
}
