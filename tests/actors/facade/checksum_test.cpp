// End-to-end KV checksums through the runtime, in one process: with the
// decode instance checking, rooms at every TP mapping (sliced, staged, with a
// prefix decode holds) succeed byte for byte; one byte flipped in flight
// (faulty_transport's seam) fails that room alone, on every rank of both
// instances, with one checksum_mismatch that names the page, the buffer and
// the rank that checked, and nothing hangs.
#include "tests/support/instance_fixture.hpp"

#include <numeric>

using namespace kvferry;
using namespace kvferry::test;

namespace {

struct checked_tp {
  uint32_t p_tp, d_tp;
};

struct checked_rooms {
  std::vector<instance_fixture::room_handles> handles;
  std::vector<std::vector<uint32_t>> dst;
};

/// Opens rooms 1..n of 3 pages each (chunks of 2, decode holding 5 tokens
/// of the first page of even rooms) and runs the system until it is idle.
checked_rooms run_checked_rooms(instance_fixture& f, uint64_t n) {
  checked_rooms out;
  for (uint64_t id = 1; id <= n; ++id) {
    std::vector<uint32_t> src(3), dst(3);
    std::iota(src.begin(), src.end(), static_cast<uint32_t>(3 * id));
    std::iota(dst.begin(), dst.end(), static_cast<uint32_t>(3 * (n - id + 1)));
    uint32_t prefix = id % 2 == 0 ? 5 % f.page_size : 0;
    out.handles.push_back(
        f.open_room(id, src, dst, static_cast<uint32_t>(id), static_cast<uint32_t>(id), 2, prefix));
    out.dst.push_back(dst);
  }
  f.sched.run();
  return out;
}

}  // namespace

TEST_CASE_METHOD(instance_fixture, "checksums: every room succeeds byte for byte when checked",
                 "[actors][checksum]") {
  auto m = GENERATE(checked_tp{1, 1}, checked_tp{2, 2}, checked_tp{1, 2}, checked_tp{4, 1},
                    checked_tp{2, 8});
  shape.kv_heads = GENERATE(8u, 2u);
  staging.enabled = GENERATE(true, false);
  checksum = kv_checksum::xxh3;
  page_size = 8;
  CAPTURE(m.p_tp, m.d_tp, shape.kv_heads, staging.enabled);
  start(m.p_tp, 1, m.d_tp, 1);
  auto run = run_checked_rooms(*this, 4);
  for (size_t i = 0; i < run.handles.size(); ++i) {
    CAPTURE(i);
    for (auto& s : run.handles[i].senders)
      CHECK(s.poll() == kv_poll::success);
    for (size_t k = 0; k < decode.size(); ++k) {
      CHECK(run.handles[i].receivers[k].poll() == kv_poll::success);
      CHECK(decode[k].pool->holds_room(seed, i + 1, run.dst[i], static_cast<uint32_t>(i + 1),
                                       (i + 1) % 2 == 0 ? 5 : 0));
    }
  }
}

TEST_CASE_METHOD(instance_fixture,
                 "checksums: a byte flipped in flight fails its room alike on every rank",
                 "[actors][checksum]") {
  auto m = GENERATE(checked_tp{1, 1}, checked_tp{2, 2}, checked_tp{1, 2}, checked_tp{4, 1},
                    checked_tp{2, 8});
  auto heads = GENERATE(8u, 2u, 0u);  // 0: MLA
  shape = heads == 0 ? apps::model_shape{"mla", 4, 1, 16, kv_dtype::bf16, true}
                     : apps::model_shape{"mha", 4, heads, 8, kv_dtype::bf16, false};
  staging.enabled = GENERATE(true, false);
  checksum = kv_checksum::xxh3;
  page_size = 8;
  CAPTURE(m.p_tp, m.d_tp, heads, staging.enabled);
  auto plan = std::make_shared<faulty_transport::plan>();
  plan->flip = {0};  // prefill rank 0's first post
  faults[0] = plan;
  start(m.p_tp, 1, m.d_tp, 1);
  auto run = run_checked_rooms(*this, 4);
  size_t failed = 0;
  for (size_t i = 0; i < run.handles.size(); ++i) {
    CAPTURE(i);
    auto& h = run.handles[i];
    if (h.senders.front().poll() != kv_poll::failed) {
      for (auto& s : h.senders)
        CHECK(s.poll() == kv_poll::success);
      for (size_t k = 0; k < decode.size(); ++k)
        CHECK(h.receivers[k].poll() == kv_poll::success);
      continue;
    }
    ++failed;
    auto why = one_failure(h.senders);
    CHECK(one_failure(h.receivers) == why);
    CHECK(why.code == errc::checksum_mismatch);
    CHECK(why.origin.side == role::decode);
    CHECK_THAT(why.cause, Catch::Contains(" (page ") && Catch::Contains(" of the room), buffer ") &&
                              Catch::Contains(": xxh3 ") &&
                              Catch::Contains(" landed, the source sent "));
  }
  CHECK(failed == 1);
  CHECK(plan->posts > 0);
}

TEST_CASE_METHOD(instance_fixture, "checksums: without them the flipped byte goes unnoticed",
                 "[actors][checksum]") {
  // The control: the seam does change what lands, and only checksums see it.
  page_size = 8;
  auto plan = std::make_shared<faulty_transport::plan>();
  plan->flip = {0};
  faults[0] = plan;
  start(1, 1, 1, 1);
  auto run = run_checked_rooms(*this, 2);
  size_t wrong = 0;
  for (size_t i = 0; i < run.handles.size(); ++i) {
    CHECK(run.handles[i].senders.front().poll() == kv_poll::success);
    CHECK(run.handles[i].receivers.front().poll() == kv_poll::success);
    wrong += decode.front().pool->holds_room(seed, i + 1, run.dst[i], static_cast<uint32_t>(i + 1),
                                             (i + 1) % 2 == 0 ? 5 : 0)
                 ? 0
                 : 1;
  }
  CHECK(wrong == 1);
}

TEST_CASE_METHOD(instance_fixture,
                 "checksums: a registration naming an unknown checksum is refused, naming it",
                 "[actors][checksum]") {
  start(1, 1, 1, 1);
  auto registration = [&](std::string checksum) {
    return dest_registration{decode[0].rt->rank(),
                             decode[0].rt->decode(),
                             "inproc://elsewhere",
                             state_of<decode_rank_state>(decode[0].rt->decode()).cfg.pool.layout,
                             {},
                             {},
                             std::move(checksum)};
  };
  auto rh = self->request(prefill[0].rt->prefill(), caf::infinite, registration("crc99"));
  sched.run();
  std::optional<caf::error> refused;
  rh.receive([](dest_accepted&) { FAIL("an unknown checksum was accepted"); },
             [&](caf::error& err) { refused = err; });
  REQUIRE(refused);
  CHECK(refused->code() == static_cast<uint8_t>(errc::unsupported));
  CHECK_THAT(
      sys.render(*refused),
      Catch::Contains("checksum \"crc99\" of decode decode-0 tp0 pp0, expected off or xxh3"));
}

TEST_CASE("checksums: a decode rank with a device pool refuses to start with them",
          "[actors][checksum]") {
  instance_fixture f;
  apps::host_pool pool{f.shape, 4, 8, 4, 64, apps::rank_place{0, 1, 0, 1}, {}};
  rank_options o;
  o.side = role::decode;
  o.instance = "decode-0";
  o.pool = pool.describe();
  for (auto& b : o.pool.kv)
    b.memory = transport::memory_kind::device;
  o.device_copier = "host";
  o.transport = "inproc";
  o.wait_on_stop = false;
  o.checksum = kv_checksum::xxh3;
  auto rt = runtime::start(f.sys, std::move(o));
  REQUIRE_FALSE(rt);
  CHECK_THAT(to_string(rt.error()),
             Catch::Contains("checksum xxh3 over a device pool: checksums are built for host "
                             "pools only"));
}
