// A decode rank's death costs only its rooms (issue 28): every room it takes
// part in fails alike on the decider, the other decode ranks and every prefill
// rank; while it is away its instance serves no room, and says so at once
// (instance_incomplete, naming it) instead of leaving rooms to wait for a join
// that will not come; no prefill instance is ever taken for down because of
// it; a restarted rank registers again and the instance takes rooms again.
// The same with heterogeneous TP and staging (fan-in 4 -> 2, fan-out 2 -> 4),
// where the staging rings of both the dead rank's peers and the survivors
// hold nothing of the failed rooms afterwards. Deterministic (CAF's test
// coordinator): "at once" means with no virtual time passing.
#include "tests/support/instance_fixture.hpp"

#include "actors/decision/decider_actor.hpp"
#include "actors/staging/staging_actor.hpp"
#include "actors/transfer/transfer_actor.hpp"

using namespace kvferry;
using namespace kvferry::test;

namespace {

/// Room `id` opened on every live decode rank (the ranks in `skip` are dead:
/// their schedulers do not open it) and every prefill rank, sending `src` in
/// chunks of `chunk` pages but holding the last chunk back when `partial`.
instance_fixture::room_handles open_on(instance_fixture& f, uint64_t id,
                                       const std::vector<uint32_t>& src,
                                       const std::vector<uint32_t>& dst, uint32_t aux,
                                       const std::set<size_t>& skip, bool partial = false) {
  instance_fixture::room_handles h;
  for (size_t k = 0; k < f.decode.size(); ++k) {
    if (skip.count(k))
      continue;
    h.receivers.push_back(f.decode[k].rt->make_receiver(id, f.where()));
    h.receivers.back().init(dst, aux);
  }
  auto n = static_cast<uint32_t>(src.size());
  for (auto& r : f.prefill) {
    r.pool->fill_room(f.seed, id, src, aux);
    h.senders.push_back(r.rt->make_sender(id));
    auto& s = h.senders.back();
    s.init(n, aux);
    s.send({src.begin(), src.begin() + (partial ? 1 : n)}, !partial);
  }
  return h;
}

/// Nothing of any room is left on the live ranks, their transfer actors and
/// staging rings, or the decider (the leak checks of the fault simulation).
void nothing_held(instance_fixture& f, const std::set<size_t>& dead_decode,
                  const std::set<size_t>& dead_prefill = {}) {
  for (size_t k = 0; k < f.prefill.size(); ++k) {
    if (dead_prefill.count(k))
      continue;
    auto& st = instance_fixture::state_of<prefill_rank_state>(f.prefill[k].rt->prefill());
    CAPTURE(k);
    CHECK(st.rooms.empty());
    CHECK(st.early.waiting_rooms() == 0u);
    auto& t = instance_fixture::state_of<transfer_state>(f.prefill[k].rt->transfer());
    CHECK(t.book.empty());
    CHECK(t.queue.size() == 0u);
    CHECK(t.gathered.idle());
  }
  for (size_t k = 0; k < f.decode.size(); ++k) {
    if (dead_decode.count(k))
      continue;
    CAPTURE(k);
    auto& st = instance_fixture::state_of<decode_rank_state>(f.decode[k].rt->decode());
    CHECK(st.rooms.empty());
    CHECK(st.draining.empty());
    if (auto ring = f.decode[k].rt->staging()) {
      auto& sst = instance_fixture::state_of<staging_state>(ring);
      CHECK(sst.book->rooms() == 0u);
      CHECK(sst.book->chunks_held() == 0u);
      CHECK(sst.waiting.empty());
    }
  }
  CHECK(instance_fixture::state_of<decider_state>(f.dec).book.size() == 0u);
}

/// Once the struck rank's new process is in: a room opened on every rank
/// succeeds, byte for byte, and nothing of it is held after.
void serves_again(instance_fixture& f) {
  auto back = f.open_room(5, {1, 3}, {9, 10}, 4, 4, 1);
  f.sched.run();
  for (auto& s : back.senders)
    CHECK(s.poll() == kv_poll::success);
  for (size_t k = 0; k < f.decode.size(); ++k) {
    CHECK(back.receivers[k].poll() == kv_poll::success);
    CHECK(f.decode[k].pool->holds_room(f.seed, 5, {9, 10}, 4));
  }
  back.senders.clear();
  back.receivers.clear();
  f.pass(f.limits.decider_silence());
  nothing_held(f, {});
}

/// The whole life of one decode rank's death on prefill TP `ptp` -> decode TP
/// `dtp`: a room in flight, the kill, rooms while it is away, the restart.
void decode_rank_dies(instance_fixture& f, uint32_t ptp, uint32_t dtp, size_t victim) {
  f.start(ptp, 1, dtp, 1);
  {
    auto warm = f.open_room(1, {1, 2}, {3, 4}, 1, 1, 0);
    f.sched.run();
    for (auto& r : warm.receivers)
      REQUIRE(r.poll() == kv_poll::success);
  }

  // Room 2 is in flight (one chunk of two sent) when the rank dies.
  auto live = open_on(f, 2, {1, 2}, {5, 6}, 2, {}, true);
  f.sched.run();
  for (auto& r : live.receivers)
    REQUIRE(r.poll() == kv_poll::transferring);
  caf::anon_send_exit(f.decode[victim].rt->decode(), caf::exit_reason::kill);
  f.sched.run();
  // Every survivor of both instances concludes it Failed, with one cause
  // that names the dead rank.
  std::vector<receiver> alive;
  for (size_t k = 0; k < live.receivers.size(); ++k)
    if (k != victim)
      alive.push_back(std::move(live.receivers[k]));
  auto why = one_failure(alive);
  CHECK(one_failure(live.senders) == why);
  CHECK(why.code == errc::peer_down);
  CHECK(why.origin.side == role::decode);
  // No prefill instance is taken for down because of a decode rank.
  for (size_t k = 0; k < f.decode.size(); ++k)
    if (k != victim)
      CHECK_FALSE(f.decode[k].rt->prefill_down(f.where()));
  live.senders.clear();
  live.receivers.clear();
  alive.clear();
  f.sched.run();

  // While it is away every new room fails at once, on every rank of both
  // instances, with instance_incomplete naming it.
  for (uint64_t id : {3u, 4u}) {
    auto away = open_on(f, id, {3, 4}, {7, 8}, 3, {victim});
    f.sched.run();  // no virtual time passes
    auto gone = one_failure(away.receivers);
    CHECK(one_failure(away.senders) == gone);
    CHECK(gone.code == errc::instance_incomplete);
    CHECK(gone.origin.side == role::decode);
    CHECK(gone.origin.tp == static_cast<uint32_t>(victim));
    CHECK_THAT(gone.cause, Catch::StartsWith("decode instance decode-0 is incomplete: decode-0 tp" +
                                             std::to_string(victim) +
                                             " pp0 went down (exit_reason(kill)) at "));
    CHECK_THAT(gone.cause, Catch::EndsWith("; its rooms fail until it is back"));
    for (size_t k = 0; k < f.decode.size(); ++k)
      if (k != victim)
        CHECK_FALSE(f.decode[k].rt->prefill_down(f.where()));
  }
  f.pass(f.limits.decider_silence());

  // A new process takes its place: it registers again, and the instance
  // takes rooms again, byte for byte.
  f.replace_decode_rank(victim, dtp, 1);
  f.sched.run();
  serves_again(f);
}

}  // namespace

TEST_CASE_METHOD(instance_fixture,
                 "a decode rank killed (TP 2 -> 2): its rooms fail alike, new rooms fail at once "
                 "as instance_incomplete, no prefill instance is taken for down, and a restarted "
                 "rank serves again",
                 "[actors][decode-death]") {
  decode_rank_dies(*this, 2, 2, 1);
}

TEST_CASE_METHOD(instance_fixture,
                 "a decode rank killed under fan-in with staging (TP 4 -> 2): the same, and no "
                 "ring keeps the failed rooms",
                 "[actors][decode-death][staging]") {
  decode_rank_dies(*this, 4, 2, 1);
}

TEST_CASE_METHOD(instance_fixture,
                 "a decode rank killed under fan-out with staging (TP 2 -> 4): the same, and no "
                 "ring keeps the failed rooms",
                 "[actors][decode-death][staging]") {
  decode_rank_dies(*this, 2, 4, 2);
}

TEST_CASE_METHOD(instance_fixture,
                 "a decode rank declared lost by heartbeats: new rooms fail at once as "
                 "instance_incomplete until it answers again, then succeed",
                 "[actors][decode-death][heartbeat]") {
  start(2, 1, 2, 1);
  auto idle = [&] {
    auto warm = open_room(1, {1, 2}, {3, 4}, 1, 1, 0);
    sched.run();
    for (auto& r : warm.receivers)
      REQUIRE(r.poll() == kv_poll::success);
  };
  idle();
  freeze(decode[1].rt->decode());
  pass(limits.silence() + 2 * limits.heartbeat);
  // Decode rank 1 is frozen: its scheduler opens nothing, the others do.
  auto away = open_on(*this, 2, {3, 4}, {7, 8}, 3, {1});
  run_live();
  auto gone = one_failure(away.receivers);
  CHECK(one_failure(away.senders) == gone);
  CHECK(gone.code == errc::instance_incomplete);
  CHECK_THAT(gone.cause, Catch::Contains("decode-0 tp1 pp0 answered none of"));
  away.receivers.clear();
  away.senders.clear();
  thaw(decode[1].rt->decode());
  pass(limits.silence() + 2 * limits.heartbeat);
  auto back = open_room(3, {1, 3}, {9, 10}, 4, 4, 1);
  sched.run();
  for (auto& s : back.senders)
    CHECK(s.poll() == kv_poll::success);
  for (size_t k = 0; k < decode.size(); ++k)
    CHECK(back.receivers[k].poll() == kv_poll::success);
}

namespace {

/// A prefill rank dies under staging (prefill TP `ptp` -> decode TP `dtp`):
/// the room in flight fails alike, the decode ranks' rings give back what
/// its room held, and a new process for the rank serves again.
void prefill_rank_dies_staged(instance_fixture& f, uint32_t ptp, uint32_t dtp, size_t victim) {
  f.start(ptp, 1, dtp, 1);
  auto live = open_on(f, 2, {1, 2}, {5, 6}, 2, {}, true);
  f.sched.run();
  for (auto& r : live.receivers)
    REQUIRE(r.poll() == kv_poll::transferring);
  caf::anon_send_exit(f.prefill[victim].rt->prefill(), caf::exit_reason::kill);
  f.sched.run();
  auto why = one_failure(live.receivers);
  for (size_t k = 0; k < live.senders.size(); ++k)
    if (k != victim) {
      REQUIRE(live.senders[k].failure());
      CHECK(live.senders[k].failure()->why == why);
    }
  live.senders.clear();
  live.receivers.clear();
  f.pass(f.limits.decider_silence());
  nothing_held(f, {}, {victim});
  f.replace_prefill_rank(victim, ptp, 1);
  f.sched.run();
  serves_again(f);
}

}  // namespace

TEST_CASE_METHOD(instance_fixture,
                 "a prefill rank killed under fan-in with staging (TP 4 -> 2): its room fails "
                 "alike, the rings give its space back, a new process serves again",
                 "[actors][prefill-death][staging]") {
  prefill_rank_dies_staged(*this, 4, 2, 2);
}

TEST_CASE_METHOD(instance_fixture,
                 "a prefill rank killed under fan-out with staging (TP 2 -> 4): its room fails "
                 "alike, the rings give its space back, a new process serves again",
                 "[actors][prefill-death][staging]") {
  prefill_rank_dies_staged(*this, 2, 4, 1);
}
