// An exception inside any actor: the actor carries on, the rooms the
// exception concerns fail at once on every rank with one cause that names the
// exception and the actor, and later rooms move every byte. Each case throws
// inside one actor while a room is live: a fault planted in the actor's
// before_handler hook (actors/base/guard.hpp), or a transport whose post throws
// (the transfer actor's seam).
#include "tests/support/instance_fixture.hpp"

#include <functional>
#include <memory>
#include <stdexcept>
#include <utility>
#include "actors/common/decider_lost.hpp"

#include "actors/base/guard.hpp"
#include "actors/staging/staging_actor.hpp"
#include "messages/staging.hpp"

using namespace kvferry;
using namespace kvferry::test;

namespace {

struct exception_fixture : instance_fixture {
  /// Plants fault `what` in `who`'s guard: the next handler (or callback)
  /// of that actor throws it, once. Returns whether it has fired.
  template <class State, class Handle>
  std::function<bool()> plant(const Handle& who, const std::string& what) {
    auto fired = std::make_shared<bool>(false);
    state_of<State>(who).before_handler = [fired, what] {
      if (!std::exchange(*fired, true))
        throw std::runtime_error(what);
    };
    return [fired] { return *fired; };
  }

  /// Plants a fault and runs the next job of `who`, which must have a
  /// message waiting: the fault fires inside that actor's guard.
  template <class State, class Handle>
  void throw_in(const Handle& who, const std::string& what) {
    REQUIRE(sched.prioritize(who));
    auto fired = plant<State>(who, what);
    sched.run_once();
    CHECK(fired());  // it fired there
  }

  /// Opens room `id` on every rank and sends its first page only: the room
  /// stays live (Transferring) until the test sends the rest.
  room_handles open_live(uint64_t id) {
    room_handles h;
    for (auto& r : decode) {
      h.receivers.push_back(r.rt->make_receiver(id, where()));
      h.receivers.back().init({4, 5}, 1);
    }
    for (auto& r : prefill) {
      r.pool->fill_room(seed, id, {0, 1}, 1);
      h.senders.push_back(r.rt->make_sender(id));
      h.senders.back().init(2, 1);
      h.senders.back().send({0}, false);
    }
    return h;
  }

  /// Every rank concluded the room Failed with one failure; returns it.
  failure one_failure(const room_handles& h) {
    std::optional<failure> first;
    auto check = [&](kv_poll state, std::optional<transfer_error> e) {
      CAPTURE(e ? to_string(e->why) : std::string{"-"});
      REQUIRE(state == kv_poll::failed);
      REQUIRE(e);
      if (!first)
        first = e->why;
      CHECK(e->why == *first);
    };
    for (auto& s : h.senders)
      check(s.poll(), s.failure());
    for (auto& r : h.receivers)
      check(r.poll(), r.failure());
    REQUIRE(first);
    return *first;
  }

  /// A later room moves every byte on every rank: the actor carried on.
  void next_room_succeeds(uint64_t id) {
    auto next = open_room(id, {6, 7}, {8, 9}, 2, 2, 1);
    sched.run();
    for (auto& s : next.senders)
      CHECK(s.poll() == kv_poll::success);
    for (size_t k = 0; k < decode.size(); ++k) {
      CHECK(next.receivers[k].poll() == kv_poll::success);
      CHECK(decode[k].pool->holds_room(seed, id, {8, 9}, 2));
    }
  }

  /// Staging applies (MHA, TP differs): 1 prefill rank, 2 decode ranks.
  void start_staged() {
    shape = apps::model_shape{"mha", 4, 8, 8, kv_dtype::bf16, false};
    page_size = 16;
    start(1, 1, 2, 1);
  }
};

}  // namespace

TEST_CASE_METHOD(exception_fixture,
                 "an exception inside a prefill rank fails its rooms everywhere - it carries on",
                 "[actors][exception]") {
  start(2, 1, 2, 1);
  auto h = open_live(80);
  sched.run();
  REQUIRE(h.senders[0].poll() == kv_poll::transferring);
  auto p = prefill[0].rt->prefill();
  self->send(p, room_poll_atom_v, uint64_t{80});
  throw_in<prefill_rank_state>(p, "planted fault");
  sched.run();
  auto why = one_failure(h);
  CHECK(why.code == errc::internal);
  CHECK(why.cause == "exception in prefill-0 tp0 pp0: planted fault");
  CHECK(same_place(why.origin, prefill[0].rt->rank()));
  next_room_succeeds(81);
}

TEST_CASE_METHOD(exception_fixture,
                 "an exception inside the decider fails its rooms everywhere - naming the decider",
                 "[actors][exception]") {
  start(2, 1, 2, 1);
  auto h = open_live(82);
  sched.run();
  self->send(dec, room_leave{room_key{999, 1}, decode[0].rt->rank()});
  throw_in<decider_state>(dec, "planted fault");
  sched.run();
  auto why = one_failure(h);
  CHECK(why.code == errc::internal);
  CHECK(why.cause == "exception in the decider of decode-0: planted fault");
  CHECK(why.origin == decider_ref("decode-0"));
  next_room_succeeds(83);
}

TEST_CASE_METHOD(exception_fixture,
                 "an exception inside the bootstrap fails the rooms waiting for its answer "
                 "everywhere - it carries on",
                 "[actors][exception]") {
  start(2, 1, 2, 1);
  // The decode ranks ask for the topology when their first room opens.
  freeze(boot);
  auto h = open_room(84, {0, 1}, {4, 5}, 1, 1, 1);
  run_live();
  thaw(boot);
  throw_in<bootstrap_state>(boot, "planted fault");  // the first topology query
  sched.run();
  auto why = one_failure(h);
  CHECK(why.code == errc::internal);
  CHECK(why.cause == "exception in the bootstrap of prefill-0: planted fault");
  CHECK(why.origin == instance_ref(role::prefill, "prefill-0", 3));
  next_room_succeeds(85);
}

TEST_CASE_METHOD(exception_fixture,
                 "an exception on a batch completion fails that room at once everywhere - the "
                 "transfer actor carries on",
                 "[actors][exception]") {
  auto fault = faults[0] = std::make_shared<faulty_transport::plan>();
  fault->unordered_writes = true;
  fault->throw_at[1] = "planted fault";
  start(1, 1, 1, 1);
  auto r = decode[0].rt->make_receiver(86, where());
  r.init({4, 5}, 1);
  prefill[0].pool->fill_room(seed, 86, {0, 1}, 1);
  auto s = prefill[0].rt->make_sender(86);
  s.init(2, 1);
  sched.run();
  auto p = prefill[0].rt->prefill();
  auto t = prefill[0].rt->transfer();
  s.send({0, 1}, true);
  expect((chunk_send), from(_).to(p));
  expect((chunk_job), from(p).to(t));
  // The KV batch is post 0; its completion's handler posts the aux row
  // (post 1), which throws.
  expect((batch_done), from(_).to(t));
  CHECK(fault->posts == 2u);
  sched.run();  // no time passes: no deadline is needed
  room_handles h;
  h.senders.push_back(std::move(s));
  h.receivers.push_back(std::move(r));
  auto why = one_failure(h);
  CHECK(why.code == errc::internal);
  CHECK(why.cause == "exception in the transfer actor: planted fault");
  CHECK(same_place(why.origin, prefill[0].rt->rank()));
  CHECK(state_of<transfer_state>(t).book.jobs().empty());
  CHECK(state_of<transfer_state>(t).book.rooms_in_flight() == 0);
  next_room_succeeds(87);
}

TEST_CASE_METHOD(exception_fixture,
                 "a post that throws on a staging grant fails that room at once everywhere - the "
                 "transfer actor carries on",
                 "[actors][exception]") {
  faults[0] = std::make_shared<faulty_transport::plan>();
  faults[0]->throw_at[0] = "injected fault in post";  // the first staged bulk write
  start_staged();
  auto h = open_room(88, {0, 1}, {4, 5}, 1, 1, 0);
  sched.run();  // no time passes: no deadline is needed
  auto why = one_failure(h);
  CHECK(why.code == errc::internal);
  CHECK(why.cause == "exception in the transfer actor: injected fault in post");
  CHECK(same_place(why.origin, prefill[0].rt->rank()));
  auto& st = state_of<transfer_state>(prefill[0].rt->transfer());
  CHECK(st.book.jobs().empty());
  CHECK(st.book.batches() == 0);
  next_room_succeeds(89);
  CHECK(prefill[0].rt->counters()->staged >= 2u);  // the next room was staged too
}

TEST_CASE_METHOD(exception_fixture,
                 "an exception inside a staging actor fails the room it concerns everywhere - it "
                 "carries on",
                 "[actors][exception]") {
  start_staged();
  auto stg = decode[0].rt->staging();
  freeze(stg);
  auto h = open_room(90, {0, 1}, {4, 5}, 1, 1, 0);
  run_live();
  thaw(stg);
  // Its decode rank opened the room there first; the writer's ask waits behind.
  auto fired = plant<staging_state>(stg, "planted fault");
  expect((staging_room), from(decode[0].rt->decode()).to(stg));
  CHECK(fired());
  sched.run();
  auto why = one_failure(h);
  CHECK(why.code == errc::internal);
  CHECK(why.cause == "exception in the staging actor of decode-0 tp0 pp0: planted fault");
  CHECK(same_place(why.origin, decode[0].rt->rank()));
  // The ask that waited for the room is refused once the room closes there.
  pass(std::chrono::seconds{6});
  CHECK(state_of<transfer_state>(prefill[0].rt->transfer()).book.jobs().empty());
  next_room_succeeds(91);
}
