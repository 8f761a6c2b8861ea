// A prefill instance (bootstrap + one rank) and decode ranks on CAF's
// deterministic scheduler, moving bytes with the inproc transport, built
// through the same runtime a scheduler uses. Time is virtual: deadlines fire
// only through advance_time() / sched.trigger_timeout().
#pragma once

#include "tests/support/caf_catch.hpp"  // first

#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include <caf/actor_system_config.hpp>

#include "actors/base/log.hpp"
#include "actors/bootstrap/bootstrap_actor.hpp"
#include "actors/facade/runtime.hpp"
#include "actors/rank/decode_rank.hpp"
#include "actors/rank/prefill_rank.hpp"
#include "actors/transfer/transfer_actor.hpp"
#include "apps/common/host_pool.hpp"
#include "apps/common/kv_pattern.hpp"
#include "messages/type_ids.hpp"
#include "messages/type_registry.hpp"

namespace kvferry::test {

struct test_config : caf::actor_system_config {
  test_config() { register_types(*this); }
};

using coordinator_fixture = test_coordinator_fixture<test_config>;

/// One rank's pool plus the runtime serving it.
struct rank_under_test {
  std::unique_ptr<apps::host_pool> pool;
  std::unique_ptr<runtime> rt;
};

struct pair_fixture : coordinator_fixture {
  apps::model_shape shape{"test", 2, 2, 8, kv_dtype::bf16, false};  // item_len 32 B/token
  uint32_t page_size = 4;
  uint32_t pool_pages = 64;
  uint32_t aux_rows = 8;
  deadlines limits;
  std::optional<deadlines> prefill_limits;  ///< per side, when they should differ
  std::optional<deadlines> decode_limits;
  std::function<std::unique_ptr<transport::transport>(std::unique_ptr<transport::transport>)>
      wrap_prefill_transport;
  uint64_t seed = 7;

  bootstrap_actor boot;
  rank_under_test prefill;
  rank_under_test decode;

  pair_fixture() {
    set_log_level("off");  // refusals are expected here; KVFERRY_LOG_LEVEL=info shows them
    limits.bootstrapping = std::chrono::seconds{60};
    limits.waiting_for_input = std::chrono::seconds{300};
    limits.transferring = std::chrono::seconds{60};
    limits.verdict = std::chrono::seconds{5};
  }

  ~pair_fixture() override {
    decode.rt.reset();
    prefill.rt.reset();
    for (auto& r : extra_)
      r.rt.reset();
    if (boot)
      caf::anon_send_exit(boot, caf::exit_reason::kill);
    sched.run();
  }

  bootstrap_locator where() const { return bootstrap_locator{boot, "", 0}; }

  /// Asks `who` and returns its answer, running only the jobs that answer
  /// needs: the deciders ping for good, so "run until no timer is left" (the
  /// DSL's request<T>()) would never end.
  template <class T, class Handle, class... Ts>
  T ask(const Handle& who, Ts... xs) {
    auto rh = self->request(who, caf::infinite, std::move(xs)...);
    sched.run();
    std::optional<T> out;
    rh.receive([&](T& x) { out = std::move(x); },
               [&](caf::error& err) { FAIL("the request failed: " << sys.render(err)); });
    REQUIRE(out);
    return std::move(*out);
  }

  /// Starts a rank with its own pool of `shape` and `page`.
  rank_under_test make_rank(role side, const apps::model_shape& s, uint32_t page,
                            std::string instance, uint32_t tp_size = 1, uint32_t pp_size = 1,
                            decider_locator decider = {}) {
    rank_under_test r;
    r.pool = std::make_unique<apps::host_pool>(s, page, pool_pages, aux_rows);
    rank_options o;
    o.side = side;
    o.instance = std::move(instance);
    o.tp_size = tp_size;
    o.pp_size = pp_size;
    o.decider = decider;
    o.pool = r.pool->describe();
    o.transport = "inproc";
    o.limits =
        side == role::prefill ? prefill_limits.value_or(limits) : decode_limits.value_or(limits);
    o.wait_on_stop = false;
    if (side == role::prefill) {
      o.bootstrap = where();
      o.wrap_transport = wrap_prefill_transport;
    }
    auto rt = runtime::start(sys, std::move(o));
    REQUIRE(rt);
    r.rt = std::move(*rt);
    return r;
  }

  /// Bootstrap, prefill rank, decode rank; runs until the prefill registered.
  void start() {
    boot = sys.spawn(bootstrap, std::string{"prefill-0"}, uint64_t{7});
    prefill = make_rank(role::prefill, shape, page_size, "prefill-0");
    decode = make_rank(role::decode, shape, page_size, "decode-0");
    sched.run();
  }

  /// Another decode rank (kept until the fixture ends).
  rank_under_test& extra_decode(const apps::model_shape& s, uint32_t page, std::string name,
                                uint32_t tp_size = 1, uint32_t pp_size = 1,
                                decider_locator decider = {}) {
    extra_.push_back(make_rank(role::decode, s, page, std::move(name), tp_size, pp_size, decider));
    return extra_.back();
  }

  /// Writes the pattern of `room` into prefill pages `pages` (logical order).
  void fill(const apps::host_pool& pool, uint64_t room, const std::vector<uint32_t>& pages,
            std::optional<uint32_t> aux = std::nullopt) {
    pool.fill_room(seed, room, pages, aux.value_or(no_aux_slot));
  }

  /// True if decode pages `pages` hold the pattern of `room` for the rank's heads.
  bool holds(const apps::host_pool& pool, uint64_t room, const std::vector<uint32_t>& pages,
             std::optional<uint32_t> aux = std::nullopt) {
    return pool.holds_room(seed, room, pages, aux.value_or(no_aux_slot));
  }

  /// True if every byte of page `page` of every buffer is zero (never written).
  static bool untouched(const apps::host_pool& pool, uint32_t page) {
    for (uint32_t b = 0; b < pool.buffers(); ++b) {
      auto* p = pool.page(b, page);
      for (uint64_t i = 0; i < pool.item_len(); ++i)
        if (p[i] != std::byte{0})
          return false;
    }
    return true;
  }

 private:
  std::deque<rank_under_test> extra_;
};

}  // namespace kvferry::test
