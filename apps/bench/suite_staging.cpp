#include "apps/bench/suite_staging.hpp"

#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/io/middleman.hpp>

#include "actors/bootstrap/bootstrap_actor.hpp"
#include "actors/decision/decider_actor.hpp"
#include "actors/process/config.hpp"
#include "actors/transfer/transfer_actor.hpp"
#include "apps/bench/bench_report.hpp"
#include "apps/common/hosted_ranks.hpp"
#include "apps/common/scheduler_driver.hpp"

namespace kvferry::bench {

namespace {

struct path_run {
  double seconds = 0;
  uint64_t bytes = 0;  ///< KV and aux landed on the decode ranks
  uint64_t writes = 0;
  uint64_t chunks = 0;
  uint64_t staged = 0;
  uint32_t rooms = 0;
  double gbps() const { return seconds > 0 ? bytes / seconds / 1e9 : 0; }
};

/// Moves the workload from a prefill instance of TP `p` to a decode instance
/// of TP `d`, with staging on or off; throws if a room fails or a byte differs.
path_run move(const args& a, const apps::model_shape& shape, uint32_t p, uint32_t d, bool staging) {
  kvferry::config cfg;
  caf::actor_system sys{cfg};
  auto boot = sys.spawn(bootstrap, std::string{"prefill-0"}, fresh_generation());
  auto dec = sys.spawn(decider, std::string{"decode-0"}, d, 1u, fresh_generation(), deadlines{});
  apps::workload w;
  w.rooms = static_cast<uint32_t>(a.get("rooms", a.has("quick") ? 6u : 16u));
  w.min_tokens = static_cast<uint32_t>(a.get("min-tokens", 128u));
  w.max_tokens = static_cast<uint32_t>(a.get("max-tokens", 256u));
  w.chunk_pages = static_cast<uint32_t>(a.get("chunk-pages", 4u));
  w.concurrency = 2;
  apps::ranks_spec spec;
  spec.shape = shape;
  spec.page_size = 16;
  spec.pool_pages = 2 * w.concurrency * (w.max_tokens / spec.page_size + 1) + 8;
  spec.aux_rows = 16;
  spec.transport = a.get("transport", std::string{"auto"});
  spec.staging.enabled = staging;
  auto pre_spec = spec;
  pre_spec.side = role::prefill;
  pre_spec.instance = "prefill-0";
  pre_spec.tp = p;
  pre_spec.bootstrap = bootstrap_locator{boot, "", 0};
  auto post_spec = spec;
  post_spec.side = role::decode;
  post_spec.instance = "decode-0";
  post_spec.tp = d;
  post_spec.decider = decider_locator{dec, "", 0};
  auto pre = apps::start_ranks(sys, pre_spec);
  if (!pre)
    throw std::runtime_error("prefill ranks: " + sys.render(pre.error()));
  auto post = apps::start_ranks(sys, post_spec);
  if (!post)
    throw std::runtime_error("decode ranks: " + sys.render(post.error()));
  std::optional<apps::run_report> prep;
  std::thread prefill_side{[&] { prep = apps::drive_prefill(pre->view(), w); }};
  auto drep = apps::drive_decode(post->view(), w, bootstrap_locator{boot, "", 0});
  prefill_side.join();
  path_run out;
  out.seconds = drep.seconds;
  out.bytes = drep.bytes;
  out.rooms = drep.rooms;
  for (auto& r : pre->ranks) {
    out.writes += r->counters()->writes;
    out.chunks += r->counters()->chunks;
    out.staged += r->counters()->staged;
  }
  pre->stop();
  post->stop();
  caf::anon_send_exit(dec, caf::exit_reason::kill);
  caf::anon_send_exit(boot, caf::exit_reason::kill);
  if (!drep.ok() || !prep->ok())
    throw std::runtime_error("TP " + std::to_string(p) + " -> " + std::to_string(d) +
                             (staging ? " staged" : " sliced") + ": " + drep.to_text("decode"));
  return out;
}

}  // namespace

int run_staging_suite(const args& a) {
  auto name = a.get("model", std::string{"llama-7b"});
  auto shape = apps::shape_named(name);
  if (!shape || shape->mla)
    throw std::invalid_argument("--model=" + name + ", expected an MHA/GQA shape of " +
                                apps::shape_names());
  auto reps = static_cast<int>(a.get("reps", a.has("quick") ? 1u : 3u));
  struct mapping {
    uint32_t p, d;
  };
  for (auto m : {mapping{4, 1}, mapping{1, 4}}) {
    std::vector<double> staged_gbps, sliced_gbps, ratios;
    path_run last_staged, last_sliced;
    for (int i = 0; i < reps; ++i) {
      last_sliced = move(a, *shape, m.p, m.d, false);
      last_staged = move(a, *shape, m.p, m.d, true);
      if (last_staged.staged != last_staged.chunks)
        throw std::runtime_error(
            "staging was not taken for every chunk: " + std::to_string(last_staged.staged) +
            " of " + std::to_string(last_staged.chunks));
      sliced_gbps.push_back(last_sliced.gbps());
      staged_gbps.push_back(last_staged.gbps());
      ratios.push_back(static_cast<double>(last_sliced.writes) /
                       static_cast<double>(std::max<uint64_t>(last_staged.writes, 1)));
    }
    auto tag = std::to_string(m.p) + "->" + std::to_string(m.d);
    figure w;
    w.suite = "staging";
    w.metric = "writes_per_request_ratio";
    w.value = median(ratios);
    w.unit = "x";
    w.reps = reps;
    w.notes["mapping"] = tag;
    w.notes["model"] = shape->name;
    w.extra["sliced_writes_per_request"] =
        static_cast<double>(last_sliced.writes) / last_sliced.rooms;
    w.extra["staged_writes_per_request"] =
        static_cast<double>(last_staged.writes) / last_staged.rooms;
    print(w, a.json);
    figure b;
    b.suite = "staging";
    b.metric = "staging_bandwidth";
    b.value = median(staged_gbps);
    b.unit = "GB/s";
    b.baseline = median(sliced_gbps);
    b.baseline_name = "head-sliced path, same rooms";
    b.reps = reps;
    b.notes["mapping"] = tag;
    b.notes["model"] = shape->name;
    b.notes["transport"] = a.get("transport", std::string{"auto"});
    b.extra["bytes_per_run"] = static_cast<double>(last_staged.bytes);
    print(b, a.json);
  }
  return 0;
}

}  // namespace kvferry::bench
