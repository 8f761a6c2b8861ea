// kvferry-demo: the main job on an embedded default. One process hosts a
// prefill instance's bootstrap (published over CAF's middleman on loopback), a
// prefill rank and a decode rank, moves the KV of a few hundred requests of a
// 7B-like model over the tcp data plane, checks every byte on the decode side,
// and prints requests, bytes, GB/s and the states the rooms reached.
//
// --role=prefill and --role=decode split the same job over two processes:
//   kvferry-demo --role=prefill            (prints the bootstrap port)
//   kvferry-demo --role=decode --bootstrap-port=PORT
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <thread>

#include <caf/actor_system.hpp>
#include <caf/io/middleman.hpp>

#include "actors/bootstrap/bootstrap_actor.hpp"
#include "actors/config.hpp"
#include "actors/facade/runtime.hpp"
#include "actors/log.hpp"
#include "apps/common/host_pool.hpp"
#include "apps/common/scheduler_driver.hpp"

namespace {

using namespace kvferry;
using namespace kvferry::apps;

struct demo_config : kvferry::config {
  std::string role = "all";
  std::string model = "llama-7b";
  std::string transport = "tcp";
  std::string host = "127.0.0.1";
  uint16_t bootstrap_port = 0;
  uint32_t page_size = 16;
  uint32_t pool_pages = 128;
  uint32_t aux_rows = 64;
  uint32_t rooms = 200;
  uint32_t min_tokens = 16;
  uint32_t max_tokens = 192;
  uint32_t chunk_pages = 4;
  uint32_t concurrency = 8;
  uint64_t seed = 42;
  bool json = false;

  demo_config() {
    opt_group{custom_options_, "global"}
        .add(role, "role", "all (one process), prefill or decode")
        .add(model, "model", "KV shape: llama-7b (MHA), deepseek-mla (MLA) or tiny")
        .add(transport, "transport", "data plane backend: tcp or inproc (role=all only)")
        .add(host, "host", "loopback address for the bootstrap and the data plane")
        .add(bootstrap_port, "bootstrap-port", "bootstrap port (prefill: 0 = any free one)")
        .add(page_size, "page-size", "tokens per KV page")
        .add(pool_pages, "pool-pages", "pages per KV buffer in each rank's pool")
        .add(aux_rows, "aux-rows", "aux rows per rank")
        .add(rooms, "rooms", "requests to move")
        .add(min_tokens, "min-tokens", "shortest prompt")
        .add(max_tokens, "max-tokens", "longest prompt")
        .add(chunk_pages, "chunk-pages", "pages per prefill chunk (0 = whole prompt at once)")
        .add(concurrency, "concurrency", "requests in flight per side")
        .add(seed, "seed", "seed of page orders, prompt lengths and KV bytes")
        .add(json, "json", "print one JSON summary line per side");
  }
};

model_shape shape_of(const std::string& name) {
  if (name == "deepseek-mla")
    return deepseek_mla();
  if (name == "tiny")
    return model_shape{"tiny", 4, 8, 64, kv_dtype::bf16, false};
  return llama_7b();
}

workload workload_of(const demo_config& cfg) {
  workload w;
  w.seed = cfg.seed;
  w.rooms = cfg.rooms;
  w.min_tokens = cfg.min_tokens;
  w.max_tokens = cfg.max_tokens;
  w.chunk_pages = cfg.chunk_pages;
  w.concurrency = cfg.concurrency;
  return w;
}

rank_options rank_of(const demo_config& cfg, role side, const host_pool& pool) {
  rank_options o;
  o.side = side;
  o.instance = side == role::prefill ? "prefill-0" : "decode-0";
  o.pool = pool.describe();
  o.transport = cfg.transport;
  o.transport_options.listen_host = cfg.host;
  o.limits = cfg.limits;
  return o;
}

void print(const run_report& r, const std::string& side, const demo_config& cfg,
           const host_pool& pool) {
  std::cout << r.to_text(side) << "\n";
  if (cfg.json)
    std::printf(
        "{\"side\":\"%s\",\"model\":\"%s\",\"page_size\":%u,\"rooms\":%u,\"success\":%u,"
        "\"failed\":%u,\"verified\":%u,\"corrupted\":%u,\"bytes\":%llu,\"seconds\":%.4f,"
        "\"gbps\":%.4f}\n",
        side.c_str(), pool.shape().name.c_str(), pool.page_size(), r.rooms, r.success, r.failed,
        r.verified, r.corrupted, static_cast<unsigned long long>(r.bytes), r.seconds, r.gbps());
  std::cout.flush();
}

/// Spawns the prefill instance's bootstrap and publishes it on loopback.
std::optional<std::pair<bootstrap_actor, uint16_t>> publish_bootstrap(caf::actor_system& sys,
                                                                      const demo_config& cfg) {
  auto boot = sys.spawn(bootstrap, std::string{"prefill-0"}, fresh_generation());
  auto port = sys.middleman().publish(boot, cfg.bootstrap_port, cfg.host.c_str(), true);
  if (!port) {
    std::cerr << "kvferry-demo: cannot publish the bootstrap on " << cfg.host << ":"
              << cfg.bootstrap_port << ": " << sys.render(port.error()) << "\n";
    caf::anon_send_exit(boot, caf::exit_reason::kill);
    return std::nullopt;
  }
  return std::make_pair(boot, *port);
}

int run(caf::actor_system& sys, const demo_config& cfg) {
  set_log_level(cfg.log_level);
  auto shape = shape_of(cfg.model);
  auto w = workload_of(cfg);
  if (cfg.role != "all" && cfg.role != "prefill" && cfg.role != "decode") {
    std::cerr << "kvferry-demo: --role=" << cfg.role << ", expected all, prefill or decode\n";
    return 2;
  }
  std::cout << "kvferry-demo: " << cfg.rooms << " requests of " << cfg.min_tokens << ".."
            << cfg.max_tokens << " tokens, model " << shape.name << " (" << shape.layers
            << " layers, " << shape.kv_heads << " kv heads x " << shape.head_dim << ", "
            << to_string(shape.dtype) << "), page size " << cfg.page_size << ", chunks of "
            << cfg.chunk_pages << " pages, " << cfg.transport << " data plane\n";
  std::optional<std::pair<bootstrap_actor, uint16_t>> boot;
  if (cfg.role != "decode") {
    boot = publish_bootstrap(sys, cfg);
    if (!boot)
      return 1;
    std::cout << "kvferry-demo: bootstrap listening on " << cfg.host << ":" << boot->second
              << std::endl;
  }
  bootstrap_locator where{{}, cfg.host, boot ? boot->second : cfg.bootstrap_port};
  int rc = 0;
  try {
    std::optional<host_pool> ppool, dpool;
    std::unique_ptr<runtime> prt, drt;
    if (cfg.role != "decode") {
      ppool.emplace(shape, cfg.page_size, cfg.pool_pages, cfg.aux_rows);
      auto opts = rank_of(cfg, role::prefill, *ppool);
      opts.bootstrap = where;
      auto rt = runtime::start(sys, std::move(opts));
      if (!rt) {
        std::cerr << "kvferry-demo: prefill rank: " << sys.render(rt.error()) << "\n";
        rc = 1;
      } else {
        prt = std::move(*rt);
      }
    }
    if (rc == 0 && cfg.role != "prefill") {
      dpool.emplace(shape, cfg.page_size, cfg.pool_pages, cfg.aux_rows);
      auto rt = runtime::start(sys, rank_of(cfg, role::decode, *dpool));
      if (!rt) {
        std::cerr << "kvferry-demo: decode rank: " << sys.render(rt.error()) << "\n";
        rc = 1;
      } else {
        drt = std::move(*rt);
      }
    }
    if (rc == 0) {
      std::optional<run_report> prep, drep;
      std::thread prefill_side;
      if (prt)
        prefill_side = std::thread{[&] { prep = drive_prefill(*prt, *ppool, w); }};
      if (drt)
        drep = drive_decode(*drt, *dpool, w, where);
      if (prefill_side.joinable())
        prefill_side.join();
      if (prep) {
        print(*prep, "prefill", cfg, *ppool);
        rc |= prep->ok() ? 0 : 1;
      }
      if (drep) {
        print(*drep, "decode", cfg, *dpool);
        rc |= drep->ok() ? 0 : 1;
      }
    }
    if (prt)
      prt->stop();
    if (drt)
      drt->stop();
  } catch (const std::exception& e) {
    std::cerr << "kvferry-demo: " << e.what() << "\n";
    rc = 1;
  }
  if (boot)
    caf::anon_send_exit(boot->first, caf::exit_reason::kill);
  return rc;
}

}  // namespace

// Not CAF_MAIN: its exec_main drops the exit code, and the exit code is how
// scripts and tests learn that a room failed or a byte differed.
int main(int argc, char** argv) {
  demo_config cfg;
  if (auto err = cfg.parse(argc, argv)) {
    std::cerr << "kvferry-demo: " << caf::to_string(err) << "\n";
    return 2;
  }
  if (cfg.cli_helptext_printed)
    return 0;
  caf::actor_system sys{cfg};
  return run(sys, cfg);
}
