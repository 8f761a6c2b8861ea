// The room protocol, path by path, message by message (CAF's test DSL on the
// deterministic scheduler, whole instances from instance_fixture). Each test
// expects every message of its path in the order each actor receives it,
// disallows what must not be sent at the point where it would be, checks
// that nothing else was sent (no job left), and ends on every rank's final
// poll state and failure cause.
//
// Paths covered:
//   equal TP (1 -> 1)       handshake, requests only once the join that named
//                           the sources is keyed, chunks, finishes, verdict, leave
//   fan-in (2 -> 1)         two writers into one rank; no verdict before all finish
//   fan-out (1 -> 2)        one writer into two ranks; no verdict before all finish
//   dummy (MLA, 2 -> 1)     one writer, one dummy source: asked with no page and
//                           no aux row, it writes nothing and finishes with its
//                           scheduler's last chunk; no verdict before all finish
//   staged (1 -> 2, MHA)    asks, grants, scatters through each decode rank's ring;
//                           no finish before the scatter
//   abort                   by the decode scheduler, by the prefill scheduler: one
//                           verdict, no write after it
//   loss                    a prefill rank, a decode rank, the decider going down;
//                           a failed transport write; a Transferring deadline
//   heartbeat loss          a prefill rank that stops answering the decider's pings:
//                           lost after the last miss, one cause, its backlog after
//   failed staged write     the bulk writes into both rings fail: one cause, no
//                           scatter; into one ring only: the other still scatters
//                           the chunk that landed there, before the ring closes
//   deadlines               WaitingForInput (the prefill side never opens the room:
//                           the verdict waits for its late open); Bootstrapping
//                           (the prefill bootstrap never answers: each side
//                           concludes with its own cause)
//
// Registration (a rank joining its bootstrap) is room_protocol_test's.
#include "tests/support/instance_fixture.hpp"
#include "tests/support/message_trace.hpp"

#include <algorithm>
#include <set>

using namespace kvferry;
using namespace kvferry::test;
using namespace std::chrono_literals;

namespace {

constexpr uint64_t room_id = 1;
constexpr uint32_t src_aux = 2;
constexpr uint32_t dst_aux = 3;
/// Bytes of one page of every head of the default shape (4 layers, 8 heads
/// of 8 bf16 values, K and V, 4 tokens a page), and of the aux row.
constexpr uint64_t page_bytes = 4 * 8 * 8 * 2 * 2 * 4;
constexpr uint64_t aux_bytes = 64;

struct paths_fixture : instance_fixture {
  std::vector<uint32_t> src{5, 6, 7, 8};
  std::vector<uint32_t> dst{10, 11, 12, 13};
  room_key key;

  prefill_rank_actor p(size_t i) { return prefill.at(i).rt->prefill(); }
  transfer_actor t(size_t i) { return prefill.at(i).rt->transfer(); }
  decode_rank_actor d(size_t i) { return decode.at(i).rt->decode(); }
  staging_actor stg(size_t i) { return decode.at(i).rt->staging(); }
  /// The ranks as their messages name them (instance generations 3 and 4).
  static rank_ref pr(uint32_t tp) { return rank_ref{role::prefill, "prefill-0", 3, tp, 0}; }
  static rank_ref dr(uint32_t tp) { return rank_ref{role::decode, "decode-0", 4, tp, 0}; }

  /// The next message waiting for `to`, without taking it.
  template <class T, class Handle>
  T next(const Handle& to) {
    return next_message<T>(to);
  }

  /// Every decode rank opens the room and inits it at once; every step of
  /// the handshake with the prefill instance and the decider, in order, up to
  /// the requests at the prefill ranks. `staged`: the sources stage;
  /// `dummies`: the prefill ranks (by index) that take part but write nothing.
  room_handles open_decode(bool staged, const std::set<size_t>& dummies = {}) {
    room_handles h;
    for (auto& r : decode) {
      h.receivers.push_back(r.rt->make_receiver(room_id, where()));
      h.receivers.back().init(dst, dst_aux);
    }
    auto nd = decode.size();
    auto np = prefill.size();
    // Each rank tells its decider of the room (no sources yet) and asks the
    // prefill instance's bootstrap who serves it; the init waits.
    for (size_t i = 0; i < nd; ++i) {
      expect((room_open_atom, uint64_t, bootstrap_locator, room_slot_ptr),
             from(d(i)).to(d(i)).with(_, room_id, _, _));
      expect((receiver_init), from(d(i)).to(d(i)));
      CHECK(h.receivers[i].poll() == kv_poll::bootstrapping);
    }
    for (size_t i = 0; i < nd; ++i)
      expect((room_join), from(d(i)).to(dec).with(room_join{room_id, dr(i), {}}));
    for (size_t i = 0; i < nd; ++i)
      expect((topology_atom), from(d(i)).to(boot));
    // The decider draws the room's generation: one key for every rank.
    key = next<room_keyed>(d(0)).key;
    CHECK(key.room == room_id);
    CHECK(key.generation != 0u);
    for (size_t i = 0; i < nd; ++i) {
      expect((room_keyed), from(dec).to(d(i)).with(room_keyed{key}));
      // Keyed, but its sources unknown: no request may go anywhere yet.
      for (size_t j = 0; j < np; ++j)
        disallow((room_request), from(d(i)).to(p(j)));
      expect((topology), from(boot).to(d(i)));
    }
    // The handshake: every decode rank registers with every prefill rank,
    // whose transport connects to it.
    for (size_t j = 0; j < np; ++j)
      for (size_t i = 0; i < nd; ++i)
        expect((dest_registration), from(d(i)).to(p(j)));
    for (size_t j = 0; j < np; ++j)
      for (size_t i = 0; i < nd; ++i)
        expect((peer_connect), from(p(j)).to(t(j)));
    for (size_t i = 0; i < nd; ++i)
      for (size_t j = 0; j < np; ++j)
        expect((dest_accepted), from(p(j)).to(d(i)).with(dest_accepted{pr(j), staged}));
    // The join that names the sources goes to the decider; until it is
    // keyed, no request goes to a source (a verdict would not reach it).
    for (size_t i = 0; i < nd; ++i) {
      auto join = next<room_join>(dec);
      CHECK(join.rank == dr(i));
      CHECK(join.prefill.size() == np);
      expect((room_join), from(d(i)).to(dec));
      for (size_t j = 0; j < np; ++j)
        disallow((room_request), from(d(i)).to(p(j)));
      CHECK(h.receivers[i].poll() == kv_poll::bootstrapping);
    }
    for (size_t i = 0; i < nd; ++i) {
      expect((room_keyed), from(dec).to(d(i)).with(room_keyed{key}));
      CHECK(h.receivers[i].poll() == kv_poll::waiting_for_input);
    }
    // Requests: every source gets the destination pages; the aux row goes
    // to the first only. Staged sources find the room open in the ring. A
    // dummy source is asked too (it takes part), with no page and no row.
    for (size_t i = 0; i < nd; ++i)
      if (staged)
        expect((staging_room), from(d(i)).to(stg(i)));
    for (size_t j = 0; j < np; ++j)
      for (size_t i = 0; i < nd; ++i) {
        bool dummy = dummies.count(j) > 0;
        expect((room_request),
               from(d(i)).to(p(j)).with(room_request{key,
                                                     dr(static_cast<uint32_t>(i)),
                                                     dec,
                                                     dummy ? std::vector<uint32_t>{} : dst,
                                                     j == 0 ? dst_aux : no_aux_slot,
                                                     {},
                                                     dummy}));
      }
    return h;
  }

  /// Every prefill rank opens the room (its requests wait there) and inits it.
  void open_prefill(room_handles& h) {
    for (auto& r : prefill) {
      r.pool->fill_room(seed, room_id, src, src_aux);
      h.senders.push_back(r.rt->make_sender(room_id));
      h.senders.back().init(static_cast<uint32_t>(src.size()), src_aux);
    }
    for (size_t j = 0; j < prefill.size(); ++j) {
      expect((room_open_atom, uint64_t, room_slot_ptr), from(p(j)).to(p(j)).with(_, room_id, _));
      expect((sender_init), from(p(j)).to(p(j)));
    }
    for (auto& s : h.senders)
      CHECK(s.poll() == kv_poll::waiting_for_input);
  }

  /// 1 -> 1, the room open on both sides, its first chunk (2 pages) landed.
  room_handles first_chunk_landed() {
    staging.enabled = false;
    start(1, 1, 1, 1);
    auto h = open_decode(false);
    open_prefill(h);
    h.senders[0].send({5, 6}, false);
    expect((chunk_send), from(p(0)).to(p(0)));
    expect((chunk_job), from(p(0)).to(t(0)));
    expect((batch_done), from(_).to(t(0)));
    expect((chunk_result), from(t(0)).to(p(0)));
    expect((chunk_landed), from(p(0)).to(d(0)).with(
                               chunk_landed{key, pr(0), 0, 2, 2 * page_bytes, false, false, 0}));
    CHECK(h.senders[0].poll() == kv_poll::transferring);
    CHECK(h.receivers[0].poll() == kv_poll::transferring);
    return h;
  }

  /// The verdict `dec` sends next to `to`, checked: Failed, with `code`,
  /// `cause` and an origin at `origin`'s place.
  template <class Handle>
  void expect_failed_verdict(const Handle& to, errc code, const std::string& cause,
                             const rank_ref& origin) {
    auto v = next<room_verdict>(to);
    CHECK(v.key == key);
    CHECK(v.outcome == kv_poll::failed);
    check_failure(v.why, code, cause, origin);
    expect((room_verdict), from(dec).to(to));
  }

  static void check_failure(const failure& why, errc code, const std::string& cause,
                            const rank_ref& origin) {
    CHECK(why.code == code);
    CHECK(why.cause == cause);
    CHECK(same_place(why.origin, origin));
  }

  /// The room concluded Failed on every handle of `hs` with this failure.
  template <class Handles>
  static void all_failed(const Handles& hs, errc code, const std::string& cause,
                         const rank_ref& origin) {
    for (auto& x : hs) {
      REQUIRE(x.poll() == kv_poll::failed);
      REQUIRE(x.failure());
      check_failure(x.failure()->why, code, cause, origin);
    }
  }

  /// True when every job left is a frozen actor's: nothing else waits.
  bool only_frozen_wait() const {
    return std::all_of(sched.jobs.begin(), sched.jobs.end(), [this](caf::resumable* job) {
      auto* a = dynamic_cast<caf::abstract_actor*>(job);
      return a != nullptr && frozen.count(a) > 0;
    });
  }

  /// MHA, prefill TP 1 -> decode TP 2 through the rings (as in the staged
  /// path), the room open on both sides.
  room_handles open_staged() {
    shape = apps::model_shape{"mha", 4, 8, 8, kv_dtype::bf16, false};
    page_size = 16;
    start(1, 1, 2, 1);
    auto h = open_decode(true);
    open_prefill(h);
    return h;
  }

  /// The scheduler sends the last chunk of a Failed room: nothing is written.
  void last_chunk_writes_nothing(room_handles& h) {
    h.senders[0].send({7, 8}, true);
    expect((chunk_send), from(p(0)).to(p(0)));
    disallow((chunk_job), from(p(0)).to(t(0)));
    disallow((room_finished), from(p(0)).to(dec));
    CHECK_FALSE(sched.has_job());
  }
};

}  // namespace

TEST_CASE_METHOD(paths_fixture, "protocol path: equal TP - every message in order",
                 "[actors][protocol][paths]") {
  staging.enabled = false;
  start(1, 1, 1, 1);
  auto h = open_decode(false);
  open_prefill(h);

  h.senders[0].send({5, 6}, false);
  expect((chunk_send), from(p(0)).to(p(0)));
  expect((chunk_job), from(p(0)).to(t(0)));
  expect((batch_done), from(_).to(t(0)));
  expect((chunk_result), from(t(0)).to(p(0)));
  expect((chunk_landed),
         from(p(0)).to(d(0)).with(chunk_landed{key, pr(0), 0, 2, 2 * page_bytes, false, false, 0}));
  CHECK(h.senders[0].poll() == kv_poll::transferring);
  CHECK(h.receivers[0].poll() == kv_poll::transferring);
  // Half the room landed: nobody has finished.
  disallow((room_finished), from(p(0)).to(dec));
  disallow((room_finished), from(d(0)).to(dec));

  h.senders[0].send({7, 8}, true);
  expect((chunk_send), from(p(0)).to(p(0)));
  expect((chunk_job), from(p(0)).to(t(0)));
  expect((batch_done), from(_).to(t(0)));
  expect((chunk_result), from(t(0)).to(p(0)));
  expect((chunk_landed), from(p(0)).to(d(0)).with(chunk_landed{
                             key, pr(0), 1, 2, 2 * page_bytes + aux_bytes, true, false, 2}));
  // Each side finished its part; neither concludes on its own word.
  expect((room_finished), from(p(0)).to(dec).with(room_finished{key, pr(0)}));
  disallow((room_verdict), from(dec).to(p(0)));
  expect((room_finished), from(d(0)).to(dec).with(room_finished{key, dr(0)}));
  CHECK(h.senders[0].poll() == kv_poll::transferring);
  CHECK(h.receivers[0].poll() == kv_poll::transferring);
  expect((room_verdict), from(dec).to(d(0)).with(room_verdict{key, kv_poll::success, {}}));
  expect((room_verdict), from(dec).to(p(0)).with(room_verdict{key, kv_poll::success, {}}));
  disallow((room_verdict), from(dec).to(d(0)));
  disallow((room_verdict), from(dec).to(p(0)));
  CHECK_FALSE(sched.has_job());

  CHECK(h.senders[0].poll() == kv_poll::success);
  CHECK(h.receivers[0].poll() == kv_poll::success);
  CHECK_FALSE(h.senders[0].failure());
  CHECK_FALSE(h.receivers[0].failure());
  CHECK(decode[0].pool->holds_room(seed, room_id, dst, dst_aux));

  // The schedulers clear the room; the decode rank leaves the decider.
  h.senders.clear();
  h.receivers.clear();
  expect((room_clear_atom, uint64_t), from(p(0)).to(p(0)).with(_, room_id));
  expect((room_clear_atom, uint64_t), from(d(0)).to(d(0)).with(_, room_id));
  expect((room_leave), from(d(0)).to(dec).with(room_leave{key, dr(0)}));
  CHECK_FALSE(sched.has_job());
}

TEST_CASE_METHOD(paths_fixture, "protocol path: fan-in (prefill TP 2 -> decode TP 1)",
                 "[actors][protocol][paths]") {
  staging.enabled = false;
  start(2, 1, 1, 1);
  auto h = open_decode(false);
  open_prefill(h);
  // Each prefill rank holds half the heads: it writes half of every page.
  const uint64_t half = page_bytes / 2;

  for (auto& s : h.senders)
    s.send({5, 6}, false);
  for (size_t j = 0; j < 2; ++j)
    expect((chunk_send), from(p(j)).to(p(j)));
  for (size_t j = 0; j < 2; ++j) {
    expect((chunk_job), from(p(j)).to(t(j)));
    expect((batch_done), from(_).to(t(j)));
  }
  for (size_t j = 0; j < 2; ++j)
    expect((chunk_result), from(t(j)).to(p(j)));
  for (uint32_t j = 0; j < 2; ++j)
    expect((chunk_landed),
           from(p(j)).to(d(0)).with(chunk_landed{key, pr(j), 0, 2, 2 * half, false, false, 0}));

  for (auto& s : h.senders)
    s.send({7, 8}, true);
  for (size_t j = 0; j < 2; ++j)
    expect((chunk_send), from(p(j)).to(p(j)));
  for (size_t j = 0; j < 2; ++j) {
    expect((chunk_job), from(p(j)).to(t(j)));
    expect((batch_done), from(_).to(t(j)));
  }
  for (size_t j = 0; j < 2; ++j)
    expect((chunk_result), from(t(j)).to(p(j)));
  // The first source writes the aux row with its last chunk.
  expect((chunk_landed), from(p(0)).to(d(0)).with(
                             chunk_landed{key, pr(0), 1, 2, 2 * half + aux_bytes, true, false, 2}));
  expect((chunk_landed),
         from(p(1)).to(d(0)).with(chunk_landed{key, pr(1), 1, 2, 2 * half, true, false, 2}));
  // Both writers finished: still no verdict before the decode rank did.
  expect((room_finished), from(p(0)).to(dec).with(room_finished{key, pr(0)}));
  expect((room_finished), from(p(1)).to(dec).with(room_finished{key, pr(1)}));
  disallow((room_verdict), from(dec).to(p(0)));
  disallow((room_verdict), from(dec).to(p(1)));
  expect((room_finished), from(d(0)).to(dec).with(room_finished{key, dr(0)}));
  expect((room_verdict), from(dec).to(d(0)).with(room_verdict{key, kv_poll::success, {}}));
  expect((room_verdict), from(dec).to(p(0)).with(room_verdict{key, kv_poll::success, {}}));
  expect((room_verdict), from(dec).to(p(1)).with(room_verdict{key, kv_poll::success, {}}));
  CHECK_FALSE(sched.has_job());

  for (auto& s : h.senders)
    CHECK(s.poll() == kv_poll::success);
  CHECK(h.receivers[0].poll() == kv_poll::success);
  CHECK(decode[0].pool->holds_room(seed, room_id, dst, dst_aux));
}

TEST_CASE_METHOD(paths_fixture, "protocol path: fan-out (prefill TP 1 -> decode TP 2)",
                 "[actors][protocol][paths]") {
  staging.enabled = false;
  start(1, 1, 2, 1);
  auto h = open_decode(false);
  open_prefill(h);
  // Each decode rank holds half the heads: it gets half of every page.
  const uint64_t half = page_bytes / 2;

  h.senders[0].send({5, 6}, false);
  expect((chunk_send), from(p(0)).to(p(0)));
  // One job per destination rank.
  for (size_t i = 0; i < 2; ++i) {
    auto job = next<chunk_job>(t(0));
    CHECK(job.peer == dr(static_cast<uint32_t>(i)));
    expect((chunk_job), from(p(0)).to(t(0)));
  }
  expect((batch_done), from(_).to(t(0)));
  expect((batch_done), from(_).to(t(0)));
  expect((chunk_result), from(t(0)).to(p(0)));
  expect((chunk_result), from(t(0)).to(p(0)));
  for (size_t i = 0; i < 2; ++i)
    expect((chunk_landed),
           from(p(0)).to(d(i)).with(chunk_landed{key, pr(0), 0, 2, 2 * half, false, false, 0}));

  h.senders[0].send({7, 8}, true);
  expect((chunk_send), from(p(0)).to(p(0)));
  expect((chunk_job), from(p(0)).to(t(0)));
  expect((chunk_job), from(p(0)).to(t(0)));
  expect((batch_done), from(_).to(t(0)));
  expect((batch_done), from(_).to(t(0)));
  expect((chunk_result), from(t(0)).to(p(0)));
  expect((chunk_result), from(t(0)).to(p(0)));
  // Every decode rank gets the aux row.
  for (size_t i = 0; i < 2; ++i)
    expect((chunk_landed), from(p(0)).to(d(i)).with(chunk_landed{
                               key, pr(0), 1, 2, 2 * half + aux_bytes, true, false, 2}));
  expect((room_finished), from(p(0)).to(dec).with(room_finished{key, pr(0)}));
  expect((room_finished), from(d(0)).to(dec).with(room_finished{key, dr(0)}));
  // One decode rank has not reported yet: no verdict.
  disallow((room_verdict), from(dec).to(p(0)));
  disallow((room_verdict), from(dec).to(d(0)));
  expect((room_finished), from(d(1)).to(dec).with(room_finished{key, dr(1)}));
  for (size_t i = 0; i < 2; ++i)
    expect((room_verdict), from(dec).to(d(i)).with(room_verdict{key, kv_poll::success, {}}));
  expect((room_verdict), from(dec).to(p(0)).with(room_verdict{key, kv_poll::success, {}}));
  CHECK_FALSE(sched.has_job());

  CHECK(h.senders[0].poll() == kv_poll::success);
  for (size_t i = 0; i < 2; ++i) {
    CHECK(h.receivers[i].poll() == kv_poll::success);
    CHECK(decode[i].pool->holds_room(seed, room_id, dst, dst_aux));
  }
}

TEST_CASE_METHOD(paths_fixture,
                 "protocol path: staged (MHA, prefill TP 1 -> decode TP 2 through the rings)",
                 "[actors][protocol][paths]") {
  shape = apps::model_shape{"mha", 4, 8, 8, kv_dtype::bf16, false};
  page_size = 16;
  start(1, 1, 2, 1);
  auto h = open_decode(true);
  open_prefill(h);
  // A staged chunk of 2 pages: half the heads of 2 pages of 16 tokens.
  const uint64_t chunk_bytes = 2 * page_bytes * 4 / 2;

  auto chunk = [&](uint32_t n, bool last) {
    h.senders[0].send(last ? std::vector<uint32_t>{7, 8} : std::vector<uint32_t>{5, 6}, last);
    expect((chunk_send), from(p(0)).to(p(0)));
    expect((chunk_job), from(p(0)).to(t(0)));
    expect((chunk_job), from(p(0)).to(t(0)));
    // The writer asks each ring for space, and writes once granted.
    for (size_t i = 0; i < 2; ++i)
      expect((staging_ask), from(t(0)).to(stg(i)));
    for (size_t i = 0; i < 2; ++i)
      expect((staging_grant), from(stg(i)).to(t(0)));
    disallow((chunk_result), from(t(0)).to(p(0)));
    expect((batch_done), from(_).to(t(0)));
    expect((batch_done), from(_).to(t(0)));
    expect((chunk_result), from(t(0)).to(p(0)));
    expect((chunk_result), from(t(0)).to(p(0)));
    auto bytes = chunk_bytes + (last ? aux_bytes : 0);
    for (size_t i = 0; i < 2; ++i)
      expect((chunk_landed),
             from(p(0)).to(d(i)).with(chunk_landed{key, pr(0), n, 2, bytes, last, true, 2 * n}));
    if (last)
      expect((room_finished), from(p(0)).to(dec).with(room_finished{key, pr(0)}));
    // In the ring is not in the pages: each decode rank has its chunk
    // scattered, and counts it only then.
    for (size_t i = 0; i < 2; ++i) {
      expect((chunk_landed), from(d(i)).to(stg(i)));
      disallow((room_finished), from(d(i)).to(dec));
    }
    expect((chunk_scattered), from(stg(0)).to(d(0)));
    expect((staging_watermark), from(stg(0)).to(t(0)));
    expect((staging_watermark), from(stg(1)).to(t(0)));
    expect((chunk_scattered), from(stg(1)).to(d(1)));
  };
  chunk(0, false);
  disallow((room_finished), from(d(0)).to(dec));
  CHECK(h.receivers[0].poll() == kv_poll::transferring);
  chunk(1, true);
  for (size_t i = 0; i < 2; ++i)
    expect((room_finished), from(d(i)).to(dec).with(room_finished{key, dr(i)}));
  for (size_t i = 0; i < 2; ++i)
    expect((room_verdict), from(dec).to(d(i)).with(room_verdict{key, kv_poll::success, {}}));
  expect((room_verdict), from(dec).to(p(0)).with(room_verdict{key, kv_poll::success, {}}));
  // Concluded: each ring closes the room before its pages go back.
  for (size_t i = 0; i < 2; ++i)
    expect((staging_close), from(d(i)).to(stg(i)).with(staging_close{key}));
  for (size_t i = 0; i < 2; ++i)
    expect((staging_close), from(stg(i)).to(d(i)).with(staging_close{key}));
  CHECK_FALSE(sched.has_job());

  CHECK(h.senders[0].poll() == kv_poll::success);
  CHECK(prefill[0].rt->counters()->staged >= 4u);
  for (size_t i = 0; i < 2; ++i) {
    CHECK(h.receivers[i].poll() == kv_poll::success);
    CHECK(h.receivers[i].released());
    CHECK(decode[i].pool->holds_room(seed, room_id, dst, dst_aux));
  }
}

TEST_CASE_METHOD(paths_fixture, "protocol path: abort by the decode scheduler",
                 "[actors][protocol][paths]") {
  auto h = first_chunk_landed();
  h.receivers[0].abort();
  expect((room_abort_atom, uint64_t), from(d(0)).to(d(0)).with(_, room_id));
  const std::string cause = "aborted by the decode scheduler";
  auto report = next<room_failure>(dec);
  CHECK(report.key == key);
  check_failure(report.why, errc::aborted, cause, dr(0));
  expect((room_failure), from(d(0)).to(dec));
  expect_failed_verdict(d(0), errc::aborted, cause, dr(0));
  expect_failed_verdict(p(0), errc::aborted, cause, dr(0));
  disallow((room_verdict), from(dec).to(d(0)));
  disallow((room_verdict), from(dec).to(p(0)));
  // No write after the abort.
  last_chunk_writes_nothing(h);
  all_failed(h.senders, errc::aborted, cause, dr(0));
  all_failed(h.receivers, errc::aborted, cause, dr(0));
}

TEST_CASE_METHOD(paths_fixture, "protocol path: abort by the prefill scheduler",
                 "[actors][protocol][paths]") {
  auto h = first_chunk_landed();
  h.senders[0].abort();
  expect((room_abort_atom, uint64_t), from(p(0)).to(p(0)).with(_, room_id));
  const std::string cause = "aborted by the prefill scheduler";
  auto report = next<room_failure>(dec);
  CHECK(report.key == key);
  check_failure(report.why, errc::aborted, cause, pr(0));
  expect((room_failure), from(p(0)).to(dec));
  expect_failed_verdict(d(0), errc::aborted, cause, pr(0));
  expect_failed_verdict(p(0), errc::aborted, cause, pr(0));
  disallow((room_verdict), from(dec).to(d(0)));
  disallow((room_verdict), from(dec).to(p(0)));
  last_chunk_writes_nothing(h);
  all_failed(h.senders, errc::aborted, cause, pr(0));
  all_failed(h.receivers, errc::aborted, cause, pr(0));
}

TEST_CASE_METHOD(paths_fixture, "protocol path: loss of a prefill rank",
                 "[actors][protocol][paths]") {
  auto h = first_chunk_landed();
  caf::anon_send_exit(p(0), caf::exit_reason::kill);
  expect((caf::exit_msg), from(_).to(p(0)));
  // Everyone that watches it hears it went down: the decider decides at once.
  const std::string cause = "prefill prefill-0 tp0 pp0 went down (exit_reason(kill))";
  expect((caf::down_msg), from(p(0)).to(dec));
  // The verdict is urgent: the decode rank reads it before its own down_msg,
  // and so has nothing of its own to report.
  expect_failed_verdict(d(0), errc::peer_down, cause, pr(0));
  expect((caf::down_msg), from(p(0)).to(d(0)));
  expect((caf::down_msg), from(p(0)).to(boot));
  expect((caf::exit_msg), from(p(0)).to(t(0)));  // linked: no orphan keeps writing
  expect((rank_left), from(boot).to(d(0)));
  disallow((room_failure), from(d(0)).to(dec));
  disallow((room_verdict), from(dec).to(d(0)));
  disallow((room_finished), from(d(0)).to(dec));
  CHECK_FALSE(sched.has_job());

  all_failed(h.receivers, errc::peer_down, cause, pr(0));
  // The dead rank's own room does not hang in its scheduler's polls.
  all_failed(h.senders, errc::shut_down,
             "the rank actor of prefill-0 tp0 pp0 terminated before room 1 concluded (it was "
             "Transferring)",
             pr(0));
}

TEST_CASE_METHOD(paths_fixture, "protocol path: loss of a decode rank",
                 "[actors][protocol][paths]") {
  auto h = first_chunk_landed();
  caf::anon_send_exit(d(0), caf::exit_reason::kill);
  expect((caf::exit_msg), from(_).to(d(0)));
  const std::string cause = "decode decode-0 tp0 pp0 went down (exit_reason(kill))";
  // The prefill rank reports it; the decider, a member gone, decides first.
  expect((caf::down_msg), from(d(0)).to(p(0)));
  expect((caf::down_msg), from(d(0)).to(boot));
  expect((caf::down_msg), from(d(0)).to(dec));
  expect_failed_verdict(p(0), errc::peer_down, cause, dr(0));
  // The report names the rank that went (not the prefill rank that saw it
  // go): a verdict naming a prefill rank down makes the decode ranks take its
  // whole instance for dead.
  auto report = next<room_failure>(dec);
  check_failure(report.why, errc::peer_down, cause, dr(0));
  expect((room_failure), from(p(0)).to(dec));
  disallow((room_verdict), from(dec).to(p(0)));
  // No write after the verdict.
  last_chunk_writes_nothing(h);

  all_failed(h.senders, errc::peer_down, cause, dr(0));
  all_failed(h.receivers, errc::shut_down,
             "the rank actor of decode-0 tp0 pp0 terminated before room 1 concluded (it was "
             "Transferring)",
             dr(0));
}

TEST_CASE_METHOD(paths_fixture, "protocol path: loss of the decider", "[actors][protocol][paths]") {
  auto h = first_chunk_landed();
  caf::anon_send_exit(dec, caf::exit_reason::kill);
  expect((caf::exit_msg), from(_).to(dec));
  // No verdict will come: each rank concludes alone, in the same words, and
  // the prefill rank tells the other ranks of its instance (here: itself).
  const std::string cause =
      "contact was lost between the decider of decode-0 and a rank of the room";
  auto lost = instance_ref(role::decode, "decode-0", 4);
  expect((caf::down_msg), from(dec).to(p(0)));
  auto told = next<sibling_concluded>(p(0));
  CHECK(told.room == room_id);
  check_failure(told.why, errc::peer_down, cause, lost);
  expect((sibling_concluded), from(p(0)).to(p(0)));
  expect((caf::down_msg), from(dec).to(d(0)));
  last_chunk_writes_nothing(h);

  all_failed(h.senders, errc::peer_down, cause, lost);
  all_failed(h.receivers, errc::peer_down, cause, lost);
  // Cleared: the decode rank has no decider to leave.
  h.receivers.clear();
  expect((room_clear_atom, uint64_t), from(d(0)).to(d(0)).with(_, room_id));
  CHECK_FALSE(sched.has_job());
}

TEST_CASE_METHOD(paths_fixture, "protocol path: a transport write fails",
                 "[actors][protocol][paths]") {
  faults[0] = std::make_shared<faulty_transport::plan>();
  faults[0]->fail[1] = transport::status::connection_lost("injected");  // the second post
  auto h = first_chunk_landed();
  h.senders[0].send({7, 8}, true);
  expect((chunk_send), from(p(0)).to(p(0)));
  expect((chunk_job), from(p(0)).to(t(0)));
  expect((batch_done), from(_).to(t(0)));
  auto result = next<chunk_result>(p(0));
  CHECK(result.why.code == errc::link_lost);
  expect((chunk_result), from(t(0)).to(p(0)));
  // The chunk did not land: the decode rank hears nothing of it; the prefill
  // rank reports the failure and never says it finished.
  disallow((chunk_landed), from(p(0)).to(d(0)));
  const std::string cause = "inproc write to decode-0 tp0 pp0 failed: connection_lost: injected";
  auto report = next<room_failure>(dec);
  check_failure(report.why, errc::link_lost, cause, pr(0));
  expect((room_failure), from(p(0)).to(dec));
  disallow((room_finished), from(p(0)).to(dec));
  expect_failed_verdict(d(0), errc::link_lost, cause, pr(0));
  expect_failed_verdict(p(0), errc::link_lost, cause, pr(0));
  disallow((room_finished), from(d(0)).to(dec));
  disallow((room_verdict), from(dec).to(d(0)));
  CHECK_FALSE(sched.has_job());

  all_failed(h.senders, errc::link_lost, cause, pr(0));
  all_failed(h.receivers, errc::link_lost, cause, pr(0));
}

TEST_CASE_METHOD(paths_fixture, "protocol path: a Transferring deadline",
                 "[actors][protocol][paths]") {
  limits.heartbeat = 1h;  // no pings in the way of the deadline
  limits.transferring = 20s;
  auto h = first_chunk_landed();
  // The last chunk never comes. Until the deadline, no room deadline fires
  // (only the timeouts of requests answered long ago, which are dropped).
  sched.advance_time(19s);
  sched.run();
  CHECK(h.senders[0].poll() == kv_poll::transferring);
  CHECK(h.receivers[0].poll() == kv_poll::transferring);
  sched.advance_time(1s);
  // Both sides' deadline timers fire (one timer per rank: the deadline
  // armed before the prefill rank's last progress was replaced, no stale
  // timer of it is left); both report, the first cause wins.
  expect((deadline_atom), from(p(0)).to(p(0)));
  expect((deadline_atom), from(d(0)).to(d(0)));
  const std::string cause = to_string(key) + " stayed in Transferring past its 20s deadline";
  auto first = next<room_failure>(dec);
  check_failure(first.why, errc::deadline, cause, pr(0));
  expect((room_failure), from(p(0)).to(dec));
  auto second = next<room_failure>(dec);
  check_failure(second.why, errc::deadline, cause, dr(0));
  expect((room_failure), from(d(0)).to(dec));
  expect_failed_verdict(d(0), errc::deadline, cause, pr(0));
  expect_failed_verdict(p(0), errc::deadline, cause, pr(0));
  disallow((room_verdict), from(dec).to(d(0)));
  disallow((room_verdict), from(dec).to(p(0)));
  last_chunk_writes_nothing(h);

  all_failed(h.senders, errc::deadline, cause, pr(0));
  all_failed(h.receivers, errc::deadline, cause, pr(0));
}

TEST_CASE_METHOD(paths_fixture,
                 "protocol path: fan-in with a dummy source (MLA, prefill TP 2 -> decode TP 1)",
                 "[actors][protocol][paths]") {
  // MLA: one latent per layer, which every prefill rank holds whole. The
  // first rank writes it; the second holds the same bytes and is a dummy
  // source: it takes part in the room (registered with, asked, finishes) and
  // writes nothing, neither KV nor the aux row. (Its transfer actor still
  // connects to the decode rank at the registration: open_decode.)
  shape = apps::model_shape{"mla", 4, 1, 64, kv_dtype::bf16, true};
  staging.enabled = false;
  start(2, 1, 1, 1);
  auto h = open_decode(false, {1});
  open_prefill(h);
  // A page of the latent: 4 layers of 64 bf16 values, 4 tokens.
  const uint64_t mla_page_bytes = 4 * 64 * 2 * 4;

  for (auto& s : h.senders)
    s.send({5, 6}, false);
  for (size_t j = 0; j < 2; ++j)
    expect((chunk_send), from(p(j)).to(p(j)));
  // The writer's chunk goes out whole; the dummy hands nothing to its
  // transfer actor and tells the decode rank nothing.
  expect((chunk_job), from(p(0)).to(t(0)));
  disallow((chunk_job), from(p(1)).to(t(1)));
  expect((batch_done), from(_).to(t(0)));
  expect((chunk_result), from(t(0)).to(p(0)));
  expect((chunk_landed), from(p(0)).to(d(0)).with(
                             chunk_landed{key, pr(0), 0, 2, 2 * mla_page_bytes, false, false, 0}));
  disallow((chunk_landed), from(p(1)).to(d(0)));
  disallow((room_finished), from(p(1)).to(dec));
  CHECK_FALSE(sched.has_job());
  for (auto& s : h.senders)
    CHECK(s.poll() == kv_poll::transferring);
  CHECK(h.receivers[0].poll() == kv_poll::transferring);

  for (auto& s : h.senders)
    s.send({7, 8}, true);
  for (size_t j = 0; j < 2; ++j)
    expect((chunk_send), from(p(j)).to(p(j)));
  // The dummy's part is done once its scheduler sent the last chunk: it
  // finishes at once, before the writer's last chunk even left.
  expect((room_finished), from(p(1)).to(dec).with(room_finished{key, pr(1)}));
  disallow((chunk_job), from(p(1)).to(t(1)));
  disallow((room_verdict), from(dec).to(p(1)));
  expect((chunk_job), from(p(0)).to(t(0)));
  expect((batch_done), from(_).to(t(0)));
  expect((chunk_result), from(t(0)).to(p(0)));
  // The writer, the first source, carries the aux row.
  expect((chunk_landed), from(p(0)).to(d(0)).with(chunk_landed{
                             key, pr(0), 1, 2, 2 * mla_page_bytes + aux_bytes, true, false, 2}));
  disallow((chunk_landed), from(p(1)).to(d(0)));
  expect((room_finished), from(p(0)).to(dec).with(room_finished{key, pr(0)}));
  // Both sources finished: still no verdict before the decode rank did.
  disallow((room_verdict), from(dec).to(p(0)));
  disallow((room_verdict), from(dec).to(p(1)));
  // One writer landed everything: the decode rank waits for no dummy.
  expect((room_finished), from(d(0)).to(dec).with(room_finished{key, dr(0)}));
  expect((room_verdict), from(dec).to(d(0)).with(room_verdict{key, kv_poll::success, {}}));
  for (size_t j = 0; j < 2; ++j)
    expect((room_verdict), from(dec).to(p(j)).with(room_verdict{key, kv_poll::success, {}}));
  CHECK_FALSE(sched.has_job());

  for (auto& s : h.senders) {
    CHECK(s.poll() == kv_poll::success);
    CHECK_FALSE(s.failure());
  }
  CHECK(h.receivers[0].poll() == kv_poll::success);
  CHECK_FALSE(h.receivers[0].failure());
  CHECK(decode[0].pool->holds_room(seed, room_id, dst, dst_aux));
}

TEST_CASE_METHOD(paths_fixture, "protocol path: heartbeat loss (a prefill rank stops answering)",
                 "[actors][protocol][paths]") {
  limits.heartbeat = 1s;
  limits.heartbeat_misses = 2;
  limits.transferring = 1h;  // no room deadline in the way
  auto h = first_chunk_landed();
  // The prefill rank's process stops (SIGSTOP): nothing drops, nothing
  // answers; what is sent to it waits in its mailbox.
  freeze(p(0));

  // A round: the decider pings its member, which answers, and the prefill
  // participant of the undecided room, which does not. The decode rank
  // checks its decider (heard from: nothing to do).
  sched.advance_time(1s);
  expect((heartbeat_tick_atom), from(dec).to(dec));
  expect((heartbeat_tick_atom), from(d(0)).to(d(0)));
  expect((heartbeat_atom, uint64_t), from(dec).to(d(0)));
  expect((heartbeat_atom, uint64_t), from(d(0)).to(dec));
  CHECK(only_frozen_wait());

  // The next round finds the ping still out: a first miss, no verdict yet,
  // and no second ping (an answer to the first still counts until the
  // silence is up).
  sched.advance_time(1s);
  expect((heartbeat_tick_atom), from(dec).to(dec));
  disallow((room_verdict), from(dec).to(d(0)));
  expect((heartbeat_tick_atom), from(d(0)).to(d(0)));
  expect((heartbeat_atom, uint64_t), from(dec).to(d(0)));
  expect((heartbeat_atom, uint64_t), from(d(0)).to(dec));
  CHECK(only_frozen_wait());
  CHECK(h.receivers[0].poll() == kv_poll::transferring);

  // The silence is up: the round (urgent, ahead of the ping's timeout) finds
  // the ping still out, the second miss in a row, the rank is lost, the room
  // fails with that cause. The verdict to the frozen rank waits in its
  // mailbox; the round pings the member and probes the lost rank; the ping's
  // timeout changes nothing more.
  sched.advance_time(1s);
  const std::string cause = "prefill-0 tp0 pp0 answered none of 2 heartbeats in a row (2s)";
  expect((heartbeat_tick_atom), from(dec).to(dec));
  expect((caf::error), from(dec).to(dec).with(caf::make_error(caf::sec::request_timeout)));
  expect((heartbeat_tick_atom), from(d(0)).to(d(0)));
  expect_failed_verdict(d(0), errc::heartbeat_lost, cause, pr(0));
  // Decided: the decode rank reports nothing of its own.
  disallow((room_failure), from(d(0)).to(dec));
  expect((heartbeat_atom, uint64_t), from(dec).to(d(0)));
  expect((heartbeat_atom, uint64_t), from(d(0)).to(dec));
  CHECK(only_frozen_wait());
  all_failed(h.receivers, errc::heartbeat_lost, cause, pr(0));
  CHECK(h.senders[0].poll() == kv_poll::transferring);  // it has heard nothing yet

  // It wakes up (no time passed for it): its urgent backlog - its own check
  // (late: a stall, its decider gets a fresh grace period), the verdict and
  // the ping that was given up: liveness and the decider's word never wait
  // behind room traffic. The answer to the ping given up is dropped; the
  // next round's probe finds it alive again (for later rooms).
  thaw(p(0));
  expect((heartbeat_tick_atom), from(p(0)).to(p(0)));
  expect_failed_verdict(p(0), errc::heartbeat_lost, cause, pr(0));
  disallow((room_failure), from(p(0)).to(dec));
  expect((heartbeat_atom, uint64_t), from(dec).to(p(0)));
  expect((heartbeat_atom, uint64_t), from(p(0)).to(dec));
  CHECK_FALSE(sched.has_job());

  all_failed(h.senders, errc::heartbeat_lost, cause, pr(0));
  all_failed(h.receivers, errc::heartbeat_lost, cause, pr(0));
}

TEST_CASE_METHOD(paths_fixture, "protocol path: the staged bulk writes fail",
                 "[actors][protocol][paths]") {
  // The first chunk's bulk writes into both decode rings complete with an
  // error (the link to the decode node is lost).
  faults[0] = std::make_shared<faulty_transport::plan>();
  faults[0]->fail[0] = transport::status::connection_lost("injected");
  faults[0]->fail[1] = transport::status::connection_lost("injected");
  auto h = open_staged();
  h.senders[0].send({5, 6}, false);
  expect((chunk_send), from(p(0)).to(p(0)));
  expect((chunk_job), from(p(0)).to(t(0)));
  expect((chunk_job), from(p(0)).to(t(0)));
  for (size_t i = 0; i < 2; ++i)
    expect((staging_ask), from(t(0)).to(stg(i)));
  for (size_t i = 0; i < 2; ++i)
    expect((staging_grant), from(stg(i)).to(t(0)));
  expect((batch_done), from(_).to(t(0)));
  expect((batch_done), from(_).to(t(0)));
  for (uint32_t i = 0; i < 2; ++i) {
    auto result = next<chunk_result>(p(0));
    CHECK(result.peer == dr(i));
    CHECK(result.staged);
    CHECK(result.why.code == errc::link_lost);
    expect((chunk_result), from(t(0)).to(p(0)));
  }
  // Nothing landed in a ring: no decode rank hears of the chunk, so no ring
  // scatters anything. The prefill rank reports the first failure only.
  for (size_t i = 0; i < 2; ++i)
    disallow((chunk_landed), from(p(0)).to(d(i)));
  const std::string cause = "inproc write to decode-0 tp0 pp0 failed: connection_lost: injected";
  auto report = next<room_failure>(dec);
  check_failure(report.why, errc::link_lost, cause, pr(0));
  expect((room_failure), from(p(0)).to(dec));
  disallow((room_failure), from(p(0)).to(dec));
  disallow((room_finished), from(p(0)).to(dec));
  for (size_t i = 0; i < 2; ++i)
    expect_failed_verdict(d(i), errc::link_lost, cause, pr(0));
  expect_failed_verdict(p(0), errc::link_lost, cause, pr(0));
  // Concluded: each ring closes the room (nothing to scatter) and frees the
  // slot it granted, before the decode rank's pages go back.
  for (size_t i = 0; i < 2; ++i) {
    expect((staging_close), from(d(i)).to(stg(i)).with(staging_close{key}));
    disallow((chunk_scattered), from(stg(i)).to(d(i)));
  }
  expect((staging_watermark), from(stg(0)).to(t(0)));
  expect((staging_watermark), from(stg(1)).to(t(0)));
  for (size_t i = 0; i < 2; ++i)
    expect((staging_close), from(stg(i)).to(d(i)).with(staging_close{key}));
  for (size_t i = 0; i < 2; ++i) {
    disallow((room_finished), from(d(i)).to(dec));
    disallow((room_verdict), from(dec).to(d(i)));
  }
  CHECK_FALSE(sched.has_job());
  // No write after the verdict: no ask for ring space either.
  h.senders[0].send({7, 8}, true);
  expect((chunk_send), from(p(0)).to(p(0)));
  disallow((chunk_job), from(p(0)).to(t(0)));
  disallow((room_finished), from(p(0)).to(dec));
  CHECK_FALSE(sched.has_job());

  all_failed(h.senders, errc::link_lost, cause, pr(0));
  all_failed(h.receivers, errc::link_lost, cause, pr(0));
  for (auto& r : h.receivers)
    CHECK(r.released());
}

TEST_CASE_METHOD(paths_fixture, "protocol path: a staged bulk write fails into one ring",
                 "[actors][protocol][paths]") {
  // Only the write into decode tp0's ring fails; the one into tp1's lands.
  faults[0] = std::make_shared<faulty_transport::plan>();
  faults[0]->fail[0] = transport::status::connection_lost("injected");
  auto h = open_staged();
  // A staged chunk of 2 pages: half the heads of 2 pages of 16 tokens.
  const uint64_t chunk_bytes = 2 * page_bytes * 4 / 2;
  h.senders[0].send({5, 6}, false);
  expect((chunk_send), from(p(0)).to(p(0)));
  expect((chunk_job), from(p(0)).to(t(0)));
  expect((chunk_job), from(p(0)).to(t(0)));
  for (size_t i = 0; i < 2; ++i)
    expect((staging_ask), from(t(0)).to(stg(i)));
  for (size_t i = 0; i < 2; ++i)
    expect((staging_grant), from(stg(i)).to(t(0)));
  expect((batch_done), from(_).to(t(0)));
  expect((batch_done), from(_).to(t(0)));
  auto failed = next<chunk_result>(p(0));
  CHECK(failed.peer == dr(0));
  CHECK(failed.why.code == errc::link_lost);
  expect((chunk_result), from(t(0)).to(p(0)));
  auto landed = next<chunk_result>(p(0));
  CHECK(landed.peer == dr(1));
  CHECK_FALSE(landed.why);
  expect((chunk_result), from(t(0)).to(p(0)));
  const std::string cause = "inproc write to decode-0 tp0 pp0 failed: connection_lost: injected";
  auto report = next<room_failure>(dec);
  check_failure(report.why, errc::link_lost, cause, pr(0));
  expect((room_failure), from(p(0)).to(dec));
  // The failed chunk is never announced: tp0's ring scatters nothing. The
  // one that landed in tp1's ring is, though the room was reported failed
  // (a message the verdict makes useless); tp1 reads the verdict first (the
  // decider's word is urgent), closes the room on its ring, and the landing
  // it reads next is of a concluded room: nothing is scattered into pages on
  // their way back.
  disallow((chunk_landed), from(p(0)).to(d(0)));
  for (size_t i = 0; i < 2; ++i)
    expect_failed_verdict(d(i), errc::link_lost, cause, pr(0));
  expect_failed_verdict(p(0), errc::link_lost, cause, pr(0));
  disallow((room_finished), from(p(0)).to(dec));
  expect((chunk_landed),
         from(p(0)).to(d(1)).with(chunk_landed{key, pr(0), 0, 2, chunk_bytes, false, true, 0}));
  disallow((chunk_landed), from(d(1)).to(stg(1)));
  expect((staging_close), from(d(0)).to(stg(0)).with(staging_close{key}));
  expect((staging_close), from(d(1)).to(stg(1)).with(staging_close{key}));
  disallow((chunk_scattered), from(stg(0)).to(d(0)));
  disallow((chunk_scattered), from(stg(1)).to(d(1)));
  sched.run();
  CHECK_FALSE(sched.has_job());
  last_chunk_writes_nothing(h);

  all_failed(h.senders, errc::link_lost, cause, pr(0));
  all_failed(h.receivers, errc::link_lost, cause, pr(0));
  for (auto& r : h.receivers)
    CHECK(r.released());
}

TEST_CASE_METHOD(paths_fixture,
                 "protocol path: a WaitingForInput deadline (prefill never opens the room)",
                 "[actors][protocol][paths]") {
  limits.heartbeat = 1h;  // no pings in the way of the deadline
  limits.waiting_for_input = 4s;
  staging.enabled = false;
  start(1, 1, 2, 1);
  auto h = open_decode(false);
  // The requests wait at the prefill rank for its scheduler to open the
  // room, which it never does: no chunk comes.
  CHECK_FALSE(sched.has_job());
  sched.advance_time(3s);
  CHECK_FALSE(sched.has_job());
  for (auto& r : h.receivers)
    CHECK(r.poll() == kv_poll::waiting_for_input);
  sched.advance_time(1s);
  // Both decode ranks' deadlines fire; both report, the first cause wins.
  for (size_t i = 0; i < 2; ++i)
    expect((deadline_atom), from(d(i)).to(d(i)));
  const std::string cause = to_string(key) + " stayed in WaitingForInput past its 4s deadline";
  for (uint32_t i = 0; i < 2; ++i) {
    auto report = next<room_failure>(dec);
    check_failure(report.why, errc::deadline, cause, dr(i));
    expect((room_failure), from(d(i)).to(dec));
  }
  // The verdict goes to the prefill rank the joins named too: it keeps it
  // for the room it has not opened.
  for (size_t i = 0; i < 2; ++i)
    expect_failed_verdict(d(i), errc::deadline, cause, dr(0));
  expect_failed_verdict(p(0), errc::deadline, cause, dr(0));
  for (size_t i = 0; i < 2; ++i)
    disallow((room_verdict), from(dec).to(d(i)));
  CHECK_FALSE(sched.has_job());
  all_failed(h.receivers, errc::deadline, cause, dr(0));

  // Its scheduler opens the room late: it concludes at once, in the same
  // words, and writes nothing.
  prefill[0].pool->fill_room(seed, room_id, src, src_aux);
  h.senders.push_back(prefill[0].rt->make_sender(room_id));
  expect((room_open_atom, uint64_t, room_slot_ptr), from(p(0)).to(p(0)).with(_, room_id, _));
  disallow((room_failure), from(p(0)).to(dec));
  CHECK_FALSE(sched.has_job());
  all_failed(h.senders, errc::deadline, cause, dr(0));
  all_failed(h.receivers, errc::deadline, cause, dr(0));
}

TEST_CASE_METHOD(paths_fixture,
                 "protocol path: a Bootstrapping deadline (the prefill bootstrap never answers)",
                 "[actors][protocol][paths]") {
  limits.heartbeat = 1h;  // no pings in the way of the deadline
  limits.bootstrapping = 8s;
  staging.enabled = false;
  start(1, 1, 1, 1);
  // The prefill instance's bootstrap stops (SIGSTOP): no topology query is
  // answered, nothing drops.
  freeze(boot);
  room_handles h;
  h.receivers.push_back(decode[0].rt->make_receiver(room_id, where()));
  h.receivers.back().init(dst, dst_aux);
  prefill[0].pool->fill_room(seed, room_id, src, src_aux);
  h.senders.push_back(prefill[0].rt->make_sender(room_id));
  h.senders.back().init(static_cast<uint32_t>(src.size()), src_aux);
  expect((room_open_atom, uint64_t, bootstrap_locator, room_slot_ptr),
         from(d(0)).to(d(0)).with(_, room_id, _, _));
  expect((receiver_init), from(d(0)).to(d(0)));
  expect((room_open_atom, uint64_t, room_slot_ptr), from(p(0)).to(p(0)).with(_, room_id, _));
  expect((sender_init), from(p(0)).to(p(0)));
  // The decode rank tells its decider of the room (no sources) and asks the
  // bootstrap who serves it; the question waits.
  expect((room_join), from(d(0)).to(dec).with(room_join{room_id, dr(0), {}}));
  key = next<room_keyed>(d(0)).key;
  expect((room_keyed), from(dec).to(d(0)).with(room_keyed{key}));
  CHECK(only_frozen_wait());
  CHECK(h.receivers[0].poll() == kv_poll::bootstrapping);
  CHECK(h.senders[0].poll() == kv_poll::bootstrapping);

  // The question times out; the rank asks again after a backoff (one more
  // question waits). Some requests answered long ago time out too (dropped).
  sched.advance_time(5s);
  expect((caf::error), from(p(0)).to(p(0)));
  expect((caf::error), from(d(0)).to(d(0)).with(caf::make_error(caf::sec::request_timeout)));
  sched.advance_time(1s);
  expect((retry_atom, std::string), from(d(0)).to(d(0)).with(_, where().key()));
  CHECK(only_frozen_wait());
  sched.advance_time(1s);
  CHECK(only_frozen_wait());
  CHECK(h.receivers[0].poll() == kv_poll::bootstrapping);
  CHECK(h.senders[0].poll() == kv_poll::bootstrapping);

  // Both sides' deadline timers fire (one timer per rank: the deadline armed
  // at the open was replaced at the init). The decode rank names the
  // bootstrap it could not reach; its decider decides for the decode side.
  // No decode rank ever asked the prefill rank: it concludes alone, in its
  // instance's words.
  sched.advance_time(1s);
  expect((deadline_atom), from(d(0)).to(d(0)));
  expect((deadline_atom), from(p(0)).to(p(0)));
  disallow((room_failure), from(p(0)).to(dec));
  const std::string cause = to_string(key) +
                            " stayed in Bootstrapping past its 8s deadline (prefill instance at " +
                            where().key() + ": topology query: system_error(request_timeout))";
  auto report = next<room_failure>(dec);
  check_failure(report.why, errc::bootstrap_unreachable, cause, dr(0));
  expect((room_failure), from(d(0)).to(dec));
  expect_failed_verdict(d(0), errc::bootstrap_unreachable, cause, dr(0));
  CHECK(only_frozen_wait());
  all_failed(h.receivers, errc::bootstrap_unreachable, cause, dr(0));
  const std::string alone =
      "room 1 stayed in Bootstrapping past its 8s deadline: no decode rank asked for it";
  const auto instance = instance_ref(role::prefill, "prefill-0", 3);
  all_failed(h.senders, errc::deadline, alone, instance);

  // The bootstrap wakes up and answers both questions; the first answer
  // came too late and is dropped. The handshake completes for later rooms,
  // and the failed room is joined with its sources, so that the verdict
  // reaches the prefill side: it has concluded alone already, and keeps its
  // own cause. No request goes out for the failed room.
  thaw(boot);
  expect((topology_atom), from(d(0)).to(boot));
  expect((topology_atom), from(d(0)).to(boot));
  expect((topology), from(boot).to(d(0)));
  expect((dest_registration), from(d(0)).to(p(0)));
  expect((peer_connect), from(p(0)).to(t(0)));
  expect((dest_accepted), from(p(0)).to(d(0)).with(dest_accepted{pr(0), false}));
  auto join = next<room_join>(dec);
  CHECK(join.rank == dr(0));
  CHECK(join.prefill.size() == 1u);
  expect((room_join), from(d(0)).to(dec));
  disallow((room_request), from(d(0)).to(p(0)));
  expect((room_keyed), from(dec).to(d(0)).with(room_keyed{key}));
  expect_failed_verdict(d(0), errc::bootstrap_unreachable, cause, dr(0));
  expect_failed_verdict(p(0), errc::bootstrap_unreachable, cause, dr(0));
  disallow((room_failure), from(p(0)).to(dec));
  CHECK_FALSE(sched.has_job());

  all_failed(h.receivers, errc::bootstrap_unreachable, cause, dr(0));
  all_failed(h.senders, errc::deadline, alone, instance);
}
