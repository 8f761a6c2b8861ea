// Every message type survives CAF's binary serialization unchanged: what one
// node sends, another reads back (both register the same type-ID block).
#include "tests/support/pair_fixture.hpp"

using namespace kvferry;
using namespace kvferry::test;

namespace {

kv_layout sample_layout() {
  kv_layout l;
  l.page_size = 64;
  l.dtype = kv_dtype::fp8_e4m3;
  l.layer_ids = {0, 1, 2, UINT32_MAX};
  l.total_kv_heads = 8;
  l.kv_heads = 2;
  l.head_dim = 128;
  l.mla = false;
  l.kv_buffers = {{1, 0, 1 << 20, 16384}, {2, 4096, UINT64_MAX, 16384}};
  l.aux_buffers = {{9, 0, 4096, 64}};
  l.states = {{state_kind::page_indexed, {{10, 0, 4096, 512}}}};
  l.tp_rank = 3;
  l.tp_size = 4;
  l.pp_rank = 1;
  l.pp_size = 2;
  return l;
}

rank_ref sample_rank() {
  return rank_ref{role::decode, "décode-ü", UINT64_MAX, 7, 3};
}

}  // namespace

TEST_CASE_METHOD(coordinator_fixture, "every message type round-trips",
                 "[messages][serialization]") {
  auto l = sample_layout();
  auto r = sample_rank();
  failure f{errc::out_of_bounds, std::string{"bytes\0with nul", 14}, r};
  room_key k{UINT64_MAX, 12345};
  CHECK(roundtrip(k) == k);
  CHECK(roundtrip(r) == r);
  CHECK(roundtrip(f) == f);
  CHECK(roundtrip(l) == l);
  CHECK(roundtrip(kv_poll::transferring) == kv_poll::transferring);
  CHECK(roundtrip(errc::peer_down) == errc::peer_down);
  CHECK(roundtrip(registration_ack{"prefill-0", 99}) == registration_ack{"prefill-0", 99});
  CHECK(roundtrip(dest_accepted{r, true}) == dest_accepted{r, true});
  chunk_landed cl{k, r, 3, 16, 1 << 30, true, true, 9};
  CHECK(roundtrip(cl) == cl);
  room_failure rf{k, f};
  CHECK(roundtrip(rf) == rf);
  room_verdict rv{k, kv_poll::failed, f};
  CHECK(roundtrip(rv) == rv);
  sender_init si{5, 17, no_aux_slot};
  CHECK(roundtrip(si) == si);
  chunk_send cs{5, {9, 8, 7, UINT32_MAX}, true, {{3}, {4, 5}}};
  CHECK(roundtrip(cs) == cs);
  receiver_init ri{5, {1, 2, 3}, 4, {{1}, {}}, 37};
  CHECK(roundtrip(ri) == ri);
  room_status st{k, kv_poll::failed, f, 21};
  CHECK(roundtrip(st) == st);
  peer_connect pc{r, "tcp://[::1]:4711", l, staging_offer{{}, 3, 1 << 20}, "c0ffee"};
  CHECK(roundtrip(pc) == pc);
  chunk_job cj{k, r, 2, 5, 3, {1, 2}, {3, 4}, true, 1, 2, {{7}}, {{8}}};
  CHECK(roundtrip(cj) == cj);
  chunk_result cr{k, r, 2, true, 2, 4096, 3, true, 5, f};
  CHECK(roundtrip(cr) == cr);
  batch_done bd{77, 4, "out of bounds"};
  CHECK(roundtrip(bd) == bd);
  room_keyed rk{k};
  CHECK(roundtrip(rk) == rk);
  room_finished fin{k, r};
  CHECK(roundtrip(fin) == fin);
  room_leave lv{k, r};
  CHECK(roundtrip(lv) == lv);
  member_ack ma{"decode-0", 42};
  CHECK(roundtrip(ma) == ma);
  staging_ask sa{k, r, 4, 8, 2, 65536};
  CHECK(roundtrip(sa) == sa);
  staging_grant sg{k, 4, 1024, UINT64_MAX, 77};
  CHECK(roundtrip(sg) == sg);
  staging_watermark sw{r, 1ull << 40};
  CHECK(roundtrip(sw) == sw);
  staging_room sr{k, {5, 6, 7}, {staging_writer{r, l}}, 3};
  CHECK(roundtrip(sr) == sr);
  staging_close sc{k};
  CHECK(roundtrip(sc) == sc);
  chunk_scattered cs2{cl, f};
  CHECK(roundtrip(cs2) == cs2);
}

TEST_CASE_METHOD(coordinator_fixture, "messages with actor handles round-trip",
                 "[messages][serialization]") {
  auto boot = sys.spawn(bootstrap, std::string{"prefill-0"}, uint64_t{1});
  bootstrap_locator loc{boot, "127.0.0.1", 8998};
  CHECK(roundtrip(loc) == loc);
  topology t{"prefill-0", 5, 1, 1, {}, {}, {}};
  t.departed.push_back(rank_left{sample_rank(), "kill", false, true, 123, "127.0.0.1:8998"});
  t.bootstrap = "127.0.0.1:8998";
  CHECK(roundtrip(t) == t);
  room_request req{room_key{1, 2}, sample_rank(), {}, {5, 6}, 0, {{1}}, true, 37};
  CHECK(roundtrip(req) == req);
  room_join j{9, sample_rank(), {participant{sample_rank(), {}, {"127.0.0.1", 4242}}}};
  CHECK(roundtrip(j) == j);
  reach_peers rp{{participant{sample_rank(), {}, {"::1", 1}}}};
  CHECK(roundtrip(rp) == rp);
  decider_locator dl{{}, "127.0.0.1", 9000};
  CHECK(roundtrip(dl) == dl);
  member_registration mr{sample_rank(), {}, 2, 1, {"boot-id", "kvferry-life-1-2"}};
  CHECK(roundtrip(mr) == mr);
  caf::anon_send_exit(boot, caf::exit_reason::kill);
  sched.run();
}
