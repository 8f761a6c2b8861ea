// kvferry-demo: the main job on an embedded default. One process hosts a
// prefill instance (its bootstrap, published over CAF's middleman on
// loopback, and its ranks) and a decode instance (its decider and its ranks),
// moves the KV of a few hundred requests of a 7B-like model over the tcp data
// plane, checks every byte on every decode rank, and prints requests, bytes,
// GB/s and the states the rooms reached.
//
// --prefill-tp/--prefill-pp/--decode-tp/--decode-pp split the instances into
// ranks (one runtime per rank, as one scheduler per GPU would run them), and
// --role=prefill / --role=decode split the job over two processes:
//   kvferry-demo --role=prefill            (prints the bootstrap port)
//   kvferry-demo --role=decode --bootstrap-port=PORT
// --prefill-dp/--decode-dp split each instance into DP attention groups (each
// of tp / dp ranks with its own pool, bootstrap or decider; a room goes to
// prefill group room % prefill-dp and decode group room % decode-dp).
// --ranks=1 hosts one rank of its role only (one process per rank, as a GPU
// server runs them; --join-bootstrap for the prefill processes that join
// another's bootstrap), --epoch-ns/--interval-us pace the requests on a
// clock every process shares, and --print-conclusions prints one line per
// rank and room: what the failover test and bench read.
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <sys/mman.h>

#include <caf/actor_system.hpp>

#include "actors/base/log.hpp"
#include "actors/bootstrap/bootstrap_actor.hpp"
#include "actors/decision/decider_actor.hpp"
#include "actors/plan/dp_groups.hpp"
#include "apps/demo/demo_config.hpp"
#include "apps/demo/demo_groups.hpp"
#include "messages/wall_clock.hpp"

namespace {

using namespace kvferry;
using namespace kvferry::demo;

int run(caf::actor_system& sys, const demo_config& cfg) {
  set_log_level(cfg.log_level);
  auto named = shape_named(cfg.model);
  if (!named) {
    std::cerr << "kvferry-demo: --model=" << cfg.model << ", expected " << shape_names() << "\n";
    return 2;
  }
  auto shape = *named;
  if (!checksum_named(cfg.checksum)) {
    std::cerr << "kvferry-demo: --checksum=" << cfg.checksum << ", expected off or xxh3\n";
    return 2;
  }
  auto w = workload_of(cfg, cfg.epoch_ns);
  if (cfg.role != "all" && cfg.role != "prefill" && cfg.role != "decode") {
    std::cerr << "kvferry-demo: --role=" << cfg.role << ", expected all, prefill or decode\n";
    return 2;
  }
  if (auto bad = dp_problem(cfg)) {
    std::cerr << "kvferry-demo: " << *bad << "\n";
    return 2;
  }
  std::cout << "kvferry-demo: " << cfg.rooms << " requests of " << cfg.min_tokens << ".."
            << cfg.max_tokens << " tokens, model " << shape.name << " (" << shape.layers
            << " layers, " << shape.kv_heads << " kv heads x " << shape.head_dim << ", "
            << to_string(shape.dtype) << "), page size " << cfg.page_size << ", chunks of "
            << cfg.chunk_pages << " pages, prefill TP " << cfg.prefill_tp << " x PP "
            << cfg.prefill_pp;
  if (cfg.prefill_dp > 1)
    std::cout << " in " << cfg.prefill_dp << " DP groups";
  std::cout << " -> decode TP " << cfg.decode_tp << " x PP " << cfg.decode_pp;
  if (cfg.decode_dp > 1)
    std::cout << " in " << cfg.decode_dp << " DP groups";
  std::cout << ", " << cfg.transport << " data plane\n";
  // Memory held beside the pools, touched page by page (MAP_POPULATE), in
  // 4 KiB pages: the teardown the kernel does before this process's sockets
  // close grows with it.
  if (cfg.hold_mib > 0) {
    auto bytes = size_t{cfg.hold_mib} << 20;
    void* held = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE | MAP_NORESERVE, -1, 0);
    if (held == MAP_FAILED) {
      std::cerr << "kvferry-demo: --hold-mib=" << cfg.hold_mib << ": cannot map it\n";
      return 1;
    }
    ::madvise(held, bytes, MADV_NOHUGEPAGE);
    std::cout << "kvferry-demo: holding " << cfg.hold_mib << " MiB" << std::endl;
  }
  auto prefill_hosted = ranks_to_host(cfg, cfg.prefill_tp * cfg.prefill_pp);
  auto decode_hosted = ranks_to_host(cfg, cfg.decode_tp * cfg.decode_pp);
  if (!prefill_hosted || !decode_hosted)
    return 2;
  if (cfg.role == "prefill" && cfg.join_bootstrap && cfg.bootstrap_port == 0) {
    std::cerr << "kvferry-demo: --join-bootstrap needs --bootstrap-port, the port of the "
                 "instance's bootstrap\n";
    return 2;
  }
  // One bootstrap per prefill DP group (the first on --bootstrap-port).
  std::vector<bootstrap_actor> booted;
  std::vector<bootstrap_locator> boots;
  std::vector<decider_actor> deciders;
  auto release = [&] {
    for (auto& d : deciders)
      caf::anon_send_exit(d, caf::exit_reason::kill);
    for (auto& b : booted)
      caf::anon_send_exit(b, caf::exit_reason::kill);
  };
  for (uint32_t g = 0; g < cfg.prefill_dp; ++g) {
    if (cfg.role == "decode" || cfg.join_bootstrap) {
      boots.push_back(bootstrap_locator{{}, cfg.host, cfg.bootstrap_port});
      continue;
    }
    auto name = dp_group_instance("prefill-0", g, cfg.prefill_dp);
    auto boot = publish_bootstrap(sys, cfg, name, g == 0 ? cfg.bootstrap_port : 0);
    if (!boot) {
      release();
      return 1;
    }
    booted.push_back(boot->first);
    boots.push_back(bootstrap_locator{{}, cfg.host, boot->second});
    std::cout << "kvferry-demo: bootstrap" << (cfg.prefill_dp > 1 ? " of " + name : "")
              << " listening on " << cfg.host << ":" << boot->second << std::endl;
  }
  if (cfg.role != "prefill")
    for (uint32_t g = 0; g < cfg.decode_dp; ++g)
      deciders.push_back(sys.spawn(decider, dp_group_instance("decode-0", g, cfg.decode_dp),
                                   cfg.decode_tp / cfg.decode_dp, cfg.decode_pp, fresh_generation(),
                                   cfg.limits));
  int rc = 0;
  try {
    std::vector<group_run> pre, post;
    for (auto side : {role::prefill, role::decode}) {
      if (rc != 0 || cfg.role == (side == role::prefill ? "decode" : "prefill"))
        continue;
      auto bad = start_groups(sys, cfg, side, shape,
                              side == role::prefill ? *prefill_hosted : *decode_hosted, boots,
                              deciders, side == role::prefill ? pre : post);
      if (bad) {
        std::cerr << "kvferry-demo: a rank did not start: " << *bad << "\n";
        rc = 1;
      }
    }
    if (rc == 0) {
      // Ranks up (pools touched, registered): a harness waits for this line.
      std::cout << "ready " << wall_ns() << std::endl;
      if (cfg.epoch_from_stdin && !await_epoch(cfg, w))
        rc = 2;
    }
    if (rc == 0) {
      drive_all(pre, post, w, boots, cfg);
      rc |= print_side(pre, "prefill", cfg, shape);
      rc |= print_side(post, "decode", cfg, shape);
    }
    for (auto* side : {&pre, &post})
      for (auto& g : *side)
        g.ranks.stop();
  } catch (const std::exception& e) {
    std::cerr << "kvferry-demo: " << e.what() << "\n";
    rc = 1;
  }
  release();
  return rc;
}

}  // namespace

// Not CAF_MAIN: its exec_main drops the exit code, and the exit code is how
// scripts and tests learn that a room failed or a byte differed.
int main(int argc, char** argv) {
  // One write per line: the report shares a pipe with the log (stderr) when a
  // parent captures both, and a block-buffered stdout split report lines.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
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
