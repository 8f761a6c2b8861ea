// The vertical slice, byte for byte: many rooms with random page orders and
// several chunk sizes, page sizes 1, 16 and 64, MHA and MLA layouts, through
// the real actors and the inproc transport on the deterministic scheduler.
// Every destination page holds exactly its source page's bytes; pages no room
// was given are never touched.
#include "tests/support/pair_fixture.hpp"

#include <algorithm>
#include <numeric>
#include <random>

using namespace kvferry;
using namespace kvferry::test;

namespace {

struct room_plan {
  uint64_t id;
  std::vector<uint32_t> src, dst;
  uint32_t src_aux, dst_aux;
};

}  // namespace

TEST_CASE_METHOD(pair_fixture,
                 "byte-exact slice: page sizes - MHA and MLA - chunk sizes - random orders",
                 "[actors][slice]") {
  auto page = GENERATE(1u, 16u, 64u);
  auto kind = GENERATE(as<std::string>{}, "mha", "gqa", "mla");
  auto chunk = GENERATE(1u, 3u, 0u);  // 0: the whole room in one chunk
  CAPTURE(page, kind, chunk);
  if (kind == "mha")
    shape = apps::model_shape{"mha", 3, 8, 16, kv_dtype::bf16, false};
  else if (kind == "gqa")
    shape = apps::model_shape{"gqa", 3, 2, 16, kv_dtype::f16, false};
  else
    shape = apps::model_shape{"mla", 3, 1, 72, kv_dtype::bf16, true};
  page_size = page;
  pool_pages = 96;
  aux_rows = 16;
  start();

  std::mt19937 rng{page * 131 + chunk + static_cast<unsigned>(kind.size())};
  std::vector<uint32_t> src_free(pool_pages), dst_free(pool_pages);
  std::iota(src_free.begin(), src_free.end(), 0);
  std::iota(dst_free.begin(), dst_free.end(), 0);
  std::shuffle(src_free.begin(), src_free.end(), rng);
  std::shuffle(dst_free.begin(), dst_free.end(), rng);
  std::vector<room_plan> rooms;
  uint32_t used = 0;
  for (uint64_t id = 100; id < 110; ++id) {
    uint32_t n = std::uniform_int_distribution<uint32_t>(0, 8)(rng);
    room_plan r{id, {}, {}, static_cast<uint32_t>(id - 100), static_cast<uint32_t>(109 - id)};
    for (uint32_t j = 0; j < n; ++j) {
      r.src.push_back(src_free[used]);
      r.dst.push_back(dst_free[used]);
      ++used;
    }
    // Some rooms get runs of consecutive pages on both sides (the planner's
    // fast path), the others scattered ones.
    if (id % 3 == 0) {
      std::sort(r.src.begin(), r.src.end());
      std::sort(r.dst.begin(), r.dst.end());
    }
    fill(*prefill.pool, id, r.src, r.src_aux);
    rooms.push_back(std::move(r));
  }

  std::vector<sender> senders;
  std::vector<receiver> receivers;
  for (auto& r : rooms) {
    // Decode and prefill open in either order; chunks may precede the request.
    if (r.id % 2 == 0) {
      receivers.push_back(decode.rt->make_receiver(r.id, where()));
      receivers.back().init(r.dst, r.dst_aux);
    }
    senders.push_back(prefill.rt->make_sender(r.id));
    auto& s = senders.back();
    auto n = static_cast<uint32_t>(r.src.size());
    s.init(n, r.src_aux);
    auto step = chunk == 0 ? std::max(n, 1u) : chunk;
    for (uint32_t off = 0; off < n || off == 0; off += step) {
      auto end = std::min(n, off + step);
      s.send(std::vector<uint32_t>(r.src.begin() + off, r.src.begin() + end), end == n);
      if (end == n)
        break;
    }
    if (r.id % 2 == 1) {
      receivers.push_back(decode.rt->make_receiver(r.id, where()));
      receivers.back().init(r.dst, r.dst_aux);
    }
  }
  sched.run();

  for (size_t i = 0; i < rooms.size(); ++i) {
    CAPTURE(rooms[i].id);
    CHECK(senders[i].poll() == kv_poll::success);
    auto rcv = std::find_if(receivers.begin(), receivers.end(),
                            [&](const receiver& r) { return r.room() == rooms[i].id; });
    REQUIRE(rcv != receivers.end());
    CHECK(rcv->poll() == kv_poll::success);
    CHECK(holds(*decode.pool, rooms[i].id, rooms[i].dst, rooms[i].dst_aux));
  }
  for (uint32_t k = used; k < pool_pages; ++k)
    CHECK(untouched(*decode.pool, dst_free[k]));
}
