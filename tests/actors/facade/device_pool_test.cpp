// KV pools in device memory, end to end through the ranks: every KV byte moves
// through the device copier (the transports' device paths, staging's gather
// and scatter), never touched by the host. Run with host_device_copier, whose
// counters show the copier did the moving; on a GPU the same runtime uses the
// CUDA copier (tests/cuda/cuda_test.cpp).
#include "tests/support/caf_catch.hpp"

#include "tests/support/instance_fixture.hpp"
#include "transport/base/host_device_copier.hpp"

using namespace kvferry;
using namespace kvferry::test;

namespace {

struct tp_pair {
  uint32_t p, d;
};

}  // namespace

TEST_CASE("rooms move between device pools through the copier with and without staging",
          "[actors][device]") {
  auto c = GENERATE(tp_pair{1, 4}, tp_pair{4, 1}, tp_pair{2, 2});
  CAPTURE(c.p, c.d);
  auto copier = std::make_shared<transport::host_device_copier>();
  instance_fixture f;
  f.shape = apps::model_shape{"mha", 4, 8, 8, kv_dtype::bf16, false};
  f.page_size = 16;
  f.device = copier;
  f.start(c.p, 1, c.d, 1);
  std::vector<instance_fixture::room_handles> rooms;
  for (uint64_t id = 1; id <= 4; ++id)
    rooms.push_back(f.open_room(id, {uint32_t(id), uint32_t(id + 4)},
                                {uint32_t(id + 8), uint32_t(id + 12)}, uint32_t(id), uint32_t(id),
                                1));
  f.sched.run();
  for (uint64_t id = 1; id <= 4; ++id) {
    CAPTURE(id);
    auto& h = rooms[id - 1];
    for (auto& s : h.senders)
      CHECK(s.poll() == kv_poll::success);
    for (size_t k = 0; k < f.decode.size(); ++k) {
      CHECK(h.receivers[k].poll() == kv_poll::success);
      CHECK(f.decode[k].pool->holds_room(f.seed, id, {uint32_t(id + 8), uint32_t(id + 12)},
                                         uint32_t(id)));
    }
  }
  auto n = copier->counted();
  CAPTURE(n.copies, n.segment_copies);
  // Different TP with MHA stages: the copier gathers from device memory into
  // the gather buffer and scatters from the ring into device memory (the
  // kernel on a GPU), and the transport moves host bytes only. Same TP: the
  // transport writes between device pools, by the copier.
  bool staged = c.p != c.d;
  CHECK((n.segment_copies > 0) == staged);
  CHECK((n.copies > 0) == !staged);
  uint64_t staged_chunks = 0;
  for (auto& p : f.prefill)
    staged_chunks += p.rt->counters()->staged;
  CHECK((staged_chunks > 0) == staged);
}

TEST_CASE(
    "a pool with aux in device memory or mixed KV memory or no usable copier is refused naming why",
    "[actors][device]") {
  instance_fixture f;
  apps::host_pool pool{f.shape, 4, 8, 4, 64, apps::rank_place{0, 1, 0, 1}, {}};
  SECTION("aux in device memory") {
    rank_options o;
    o.pool = pool.describe();
    o.pool.aux[0].memory = transport::memory_kind::device;
    o.transport = "inproc";
    o.wait_on_stop = false;
    auto rt = runtime::start(f.sys, std::move(o));
    REQUIRE_FALSE(rt);
    CHECK_THAT(to_string(rt.error()), Catch::Contains("aux buffer 0 in device memory"));
  }
  SECTION("KV buffers in two kinds of memory") {
    rank_options o;
    o.pool = pool.describe();
    o.pool.kv[0].memory = transport::memory_kind::device;
    o.device_copier = "host";
    o.transport = "inproc";
    o.wait_on_stop = false;
    auto rt = runtime::start(f.sys, std::move(o));
    REQUIRE_FALSE(rt);
    CHECK_THAT(to_string(rt.error()),
               Catch::Contains("KV buffer 1 in host memory while others are in device memory"));
  }
  SECTION("an unknown copier") {
    rank_options o;
    o.pool = pool.describe();
    for (auto& b : o.pool.kv)
      b.memory = transport::memory_kind::device;
    o.device_copier = "tpu";
    o.transport = "inproc";
    o.wait_on_stop = false;
    auto rt = runtime::start(f.sys, std::move(o));
    REQUIRE_FALSE(rt);
    CHECK_THAT(to_string(rt.error()), Catch::Contains("device copier 'tpu'"));
    CHECK_THAT(to_string(rt.error()), Catch::Contains("host"));
  }
}
