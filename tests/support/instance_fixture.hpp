// Whole instances on CAF's deterministic scheduler: a prefill instance of
// TP x PP ranks with its bootstrap, a decode instance of TP x PP ranks with
// its decider, each rank a runtime with its own pool (its heads, its layers),
// moving bytes with the inproc transport. Rooms are opened on every rank of
// both instances, as every rank's scheduler would.
#pragma once

#include "tests/support/caf_catch.hpp"  // first

#include <chrono>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "actors/base/log.hpp"
#include "actors/bootstrap/bootstrap_actor.hpp"
#include "actors/decision/decider_actor.hpp"
#include "actors/facade/runtime.hpp"
#include "actors/rank/decode_rank.hpp"
#include "actors/rank/prefill_rank.hpp"
#include "actors/transfer/transfer_actor.hpp"
#include "apps/common/host_pool.hpp"
#include "messages/type_ids.hpp"
#include "messages/type_registry.hpp"
#include "tests/support/faulty_transport.hpp"

namespace kvferry::test {

struct instance_config : caf::actor_system_config {
  instance_config() { register_types(*this); }
};

struct instance_fixture : test_coordinator_fixture<instance_config> {
  struct rank {
    std::unique_ptr<apps::host_pool> pool;
    std::unique_ptr<runtime> rt;
  };

  apps::model_shape shape{"test", 4, 8, 8, kv_dtype::bf16, false};
  uint32_t page_size = 4;
  uint32_t pool_pages = 24;
  uint32_t aux_rows = 8;
  deadlines limits;
  /// Staging (heterogeneous TP, MHA/GQA): small ring and gather buffers, so
  /// that many ranks start fast; tests that need more set them.
  staging_options staging{true, 1 << 20, 1 << 20, std::chrono::seconds{10}};
  uint64_t seed = 11;
  std::vector<apps::state_spec> states;  ///< state components of every rank
  /// Fault plans per prefill rank index (tp + pp * tp_size), when set.
  std::map<size_t, std::shared_ptr<faulty_transport::plan>> faults;
  /// Set: every rank's KV buffers are registered as device memory and moved
  /// by this copier (transport/base/host_device_copier.hpp runs it on host memory).
  std::shared_ptr<transport::device_copier> device;
  /// End-to-end KV checksums the decode ranks check.
  kv_checksum checksum = kv_checksum::off;
  /// Fault plans per decode rank index, when set.
  std::map<size_t, std::shared_ptr<faulty_transport::plan>> decode_faults;

  /// DP attention: the prefill ranks register as DP group `dp_group` of
  /// `dp_size` behind `boot`, and where() names that group.
  uint32_t dp_group = bootstrap_locator::whole;
  uint32_t dp_size = 0;

  bootstrap_actor boot;
  decider_actor dec;
  std::vector<rank> prefill;  // by pp, then tp
  std::vector<rank> decode;

  instance_fixture() { set_log_level("off"); }

  ~instance_fixture() override {
    decode.clear();
    prefill.clear();
    for (auto a : {caf::actor_cast<caf::actor>(boot), caf::actor_cast<caf::actor>(dec)})
      if (a)
        caf::anon_send_exit(a, caf::exit_reason::kill);
    sched.run();
  }

  bootstrap_locator where() const { return bootstrap_locator{boot, "", 0, dp_group, dp_size}; }

  /// The state of the live stateful actor behind `h`: tests look inside.
  template <class State, class Handle>
  static State& state_of(const Handle& h) {
    auto* a = caf::actor_cast<caf::abstract_actor*>(h);
    return dynamic_cast<typename Handle::template stateful_pointer<State>>(a)->state;
  }

  // -- frozen actors: a process stopped (SIGSTOP) or cut off ------------------

  /// Actors whose jobs do not run: their mailboxes fill, nothing answers.
  std::set<const caf::abstract_actor*> frozen;

  template <class Handle>
  void freeze(const Handle& h) {
    frozen.insert(caf::actor_cast<caf::abstract_actor*>(h));
  }

  template <class Handle>
  void thaw(const Handle& h) {
    frozen.erase(caf::actor_cast<caf::abstract_actor*>(h));
  }

  /// Runs every job of an actor that is not frozen.
  size_t run_live() {
    return sched.run_jobs_filtered([this](caf::resumable* job) {
      auto* a = dynamic_cast<caf::abstract_actor*>(job);
      return a == nullptr || !frozen.count(a);
    });
  }

  /// Advances virtual time by `d` in steps of `step`, running what each step
  /// delivers to actors that are not frozen.
  void pass(std::chrono::nanoseconds d,
            std::chrono::nanoseconds step = std::chrono::milliseconds{50}) {
    for (auto t = std::chrono::nanoseconds{0}; t < d; t += step) {
      sched.advance_time(std::min(step, d - t));
      run_live();
    }
  }

  /// Spawns both instances; with `settle`, runs until registration is done.
  void start(uint32_t p_tp, uint32_t p_pp, uint32_t d_tp, uint32_t d_pp, bool settle = true) {
    start_prefill(p_tp, p_pp, 3);
    start_decode(d_tp, d_pp, 4);
    if (settle)
      sched.run();
  }

  /// The prefill instance's bootstrap (of `generation`) and ranks.
  void start_prefill(uint32_t tp, uint32_t pp, uint64_t generation) {
    boot = sys.spawn(bootstrap, std::string{"prefill-0"}, generation);
    for (uint32_t s = 0; s < pp; ++s)
      for (uint32_t t = 0; t < tp; ++t)
        prefill.push_back(make(role::prefill, t, tp, s, pp, prefill.size()));
  }

  /// The decode instance's decider (of `generation`) and ranks.
  void start_decode(uint32_t tp, uint32_t pp, uint64_t generation) {
    dec = sys.spawn(decider, std::string{"decode-0"}, tp, pp, generation, limits);
    for (uint32_t s = 0; s < pp; ++s)
      for (uint32_t t = 0; t < tp; ++t)
        decode.push_back(make(role::decode, t, tp, s, pp, decode.size()));
  }

  /// A crash of the whole prefill instance: its ranks and its bootstrap are
  /// killed. The runtimes stay (their slots can still be read) until restart.
  void kill_prefill() {
    for (auto& r : prefill)
      caf::anon_send_exit(r.rt->prefill(), caf::exit_reason::kill);
    caf::anon_send_exit(boot, caf::exit_reason::kill);
  }

  /// A crash of the whole decode instance: its ranks and its decider.
  void kill_decode() {
    for (auto& r : decode)
      caf::anon_send_exit(r.rt->decode(), caf::exit_reason::kill);
    caf::anon_send_exit(dec, caf::exit_reason::kill);
  }

  /// The next incarnation of the prefill instance, under the same name.
  void restart_prefill(uint32_t tp, uint32_t pp, uint64_t generation) {
    prefill.clear();
    start_prefill(tp, pp, generation);
    sched.run();
  }

  /// The next incarnation of the decode instance, under the same name.
  void restart_decode(uint32_t tp, uint32_t pp, uint64_t generation) {
    decode.clear();
    start_decode(tp, pp, generation);
    sched.run();
  }

  /// A new process for prefill rank `index` (tp + pp * tp size), killed
  /// before: it registers with the same bootstrap again.
  void replace_prefill_rank(size_t index, uint32_t tp, uint32_t pp) {
    auto t = static_cast<uint32_t>(index % tp);
    auto s = static_cast<uint32_t>(index / tp);
    prefill[index] = make(role::prefill, t, tp, s, pp, index);
  }

  /// A new process for decode rank `index` (tp + pp * tp size), killed
  /// before: it registers with the same decider again.
  void replace_decode_rank(size_t index, uint32_t tp, uint32_t pp) {
    auto t = static_cast<uint32_t>(index % tp);
    auto s = static_cast<uint32_t>(index / tp);
    decode[index] = make(role::decode, t, tp, s, pp, index);
  }

  /// Opens room `id` on every rank, sends its pages in chunks of `chunk`
  /// (0: one chunk); the prefill pools get the room's pattern first. The
  /// decode ranks say they hold the room's first `prefix_tokens` tokens
  /// (prefix reuse: `src` and `dst` start at the page that holds that token).
  struct room_handles {
    std::vector<sender> senders;
    std::vector<receiver> receivers;
  };
  room_handles open_room(uint64_t id, const std::vector<uint32_t>& src,
                         const std::vector<uint32_t>& dst, uint32_t src_aux, uint32_t dst_aux,
                         uint32_t chunk, uint32_t prefix_tokens = 0) {
    room_handles h;
    for (auto& r : decode) {
      h.receivers.push_back(r.rt->make_receiver(id, where()));
      h.receivers.back().init(dst, dst_aux, {}, prefix_tokens);
    }
    auto n = static_cast<uint32_t>(src.size());
    for (auto& r : prefill) {
      r.pool->fill_room(seed, id, src, src_aux);
      h.senders.push_back(r.rt->make_sender(id));
      auto& s = h.senders.back();
      s.init(n, src_aux);
      auto step = chunk == 0 ? std::max(n, 1u) : chunk;
      for (uint32_t off = 0;; off += step) {
        auto end = std::min(n, off + step);
        s.send(std::vector<uint32_t>(src.begin() + off, src.begin() + end), end == n);
        if (end == n)
          break;
      }
    }
    return h;
  }

 protected:
  /// A rank of `side` at (t, s) of tp x pp; `index` picks its fault plan.
  /// By default it belongs to this fixture's instances ("prefill-0" behind
  /// where(), "decode-0" with `dec`); `at`, `via` and `instance` place it
  /// elsewhere (another DP group, another decider).
  rank make(role side, uint32_t t, uint32_t tp, uint32_t s, uint32_t pp, size_t index,
            std::optional<bootstrap_locator> at = std::nullopt,
            std::optional<decider_locator> via = std::nullopt, std::string instance = {}) {
    rank r;
    r.pool = std::make_unique<apps::host_pool>(shape, page_size, pool_pages, aux_rows, 64,
                                               apps::rank_place{t, tp, s, pp}, states);
    rank_options o;
    o.side = side;
    o.instance = !instance.empty() ? instance : side == role::prefill ? "prefill-0" : "decode-0";
    o.tp_rank = t;
    o.tp_size = tp;
    o.pp_rank = s;
    o.pp_size = pp;
    o.pool = r.pool->describe();
    o.transport = "inproc";
    if (device) {
      for (auto& b : o.pool.kv)
        b.memory = transport::memory_kind::device;
      o.transport_options.device = device;
    }
    o.limits = limits;
    o.staging = staging;
    o.checksum = checksum;
    o.wait_on_stop = false;
    o.bootstrap = at ? *at : where();
    o.decider = via ? *via : decider_locator{dec, "", 0};
    auto& plans = side == role::prefill ? faults : decode_faults;
    if (auto f = plans.find(index); f != plans.end())
      o.wrap_transport = [plan = f->second](std::unique_ptr<transport::transport> inner) {
        return std::unique_ptr<transport::transport>{
            std::make_unique<faulty_transport>(std::move(inner), plan)};
      };
    auto rt = runtime::start(sys, std::move(o));
    REQUIRE(rt);
    r.rt = std::move(*rt);
    return r;
  }
};

/// Every handle of `hs` concluded Failed with one cause; returns it.
template <class Handles>
failure one_failure(const Handles& hs) {
  std::optional<failure> first;
  for (auto& h : hs) {
    auto e = h.failure();
    CAPTURE(e ? to_string(e->why) : std::string{"-"});
    REQUIRE(h.poll() == kv_poll::failed);
    REQUIRE(e);
    if (!first)
      first = e->why;
    CHECK(e->why == *first);
  }
  REQUIRE(first);
  return *first;
}

}  // namespace kvferry::test
