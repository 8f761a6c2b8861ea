#include "apps/bench/path_run.hpp"

#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include <caf/actor_system.hpp>
#include <caf/io/middleman.hpp>

#include "actors/bootstrap/bootstrap_actor.hpp"
#include "actors/decision/decider_actor.hpp"
#include "actors/process/config.hpp"
#include "actors/transfer/transfer_actor.hpp"
#include "apps/common/hosted_ranks.hpp"
#include "apps/common/scheduler_driver.hpp"

namespace kvferry::bench {

path_run move_rooms(const args& a, const apps::model_shape& shape, uint32_t p, uint32_t d,
                    path_choice how) {
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
  spec.staging.enabled = how.staging;
  spec.checksum = how.checksum;
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
                             (how.staging ? " staged" : " sliced") +
                             (how.checksum != kv_checksum::off ? " checked" : "") + ": " +
                             drep.to_text("decode"));
  return out;
}

}  // namespace kvferry::bench
