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
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <sys/mman.h>

#include <caf/actor_system.hpp>
#include <caf/io/middleman.hpp>

#include "actors/base/log.hpp"
#include "actors/bootstrap/bootstrap_actor.hpp"
#include "actors/decision/decider_actor.hpp"
#include "actors/facade/runtime.hpp"
#include "actors/gateway/tls.hpp"
#include "actors/plan/dp_groups.hpp"
#include "actors/process/config.hpp"
#include "apps/common/host_pool.hpp"
#include "apps/common/hosted_ranks.hpp"
#include "apps/common/scheduler_driver.hpp"
#include "messages/wall_clock.hpp"

namespace {

using namespace kvferry;
using namespace kvferry::apps;

struct demo_config : kvferry::config {
  std::string role = "all";
  std::string model = "llama-7b";
  std::string transport = "auto";
  std::string host = "127.0.0.1";
  uint16_t bootstrap_port = 0;
  uint32_t prefill_tp = 1;
  uint32_t prefill_pp = 1;
  uint32_t decode_tp = 1;
  uint32_t decode_pp = 1;
  uint32_t prefill_dp = 1;
  uint32_t decode_dp = 1;
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
  std::string ranks;  // empty: every rank of the role
  bool join_bootstrap = false;
  bool follow_requests = false;
  uint32_t hold_mib = 0;
  int64_t epoch_ns = 0;
  bool epoch_from_stdin = false;
  uint32_t interval_us = 0;
  bool print_conclusions = false;
  bool no_staging = false;
  uint32_t staging_mib = 32;
  std::string checksum = "off";

  demo_config() {
    opt_group{custom_options_, "global"}
        .add(role, "role", "all (one process), prefill or decode")
        .add(model, "model", "KV shape: llama-7b (MHA), deepseek-mla (MLA), tiny or tiny-gqa")
        .add(transport, "transport",
             "data plane backend: auto (shm on one host, else tcp), tcp, shm or inproc (role=all "
             "only)")
        .add(host, "host", "loopback address for the bootstrap and the data plane")
        .add(bootstrap_port, "bootstrap-port", "bootstrap port (prefill: 0 = any free one)")
        .add(prefill_tp, "prefill-tp", "TP ranks of the prefill instance")
        .add(prefill_pp, "prefill-pp", "PP stages of the prefill instance")
        .add(decode_tp, "decode-tp", "TP ranks of the decode instance")
        .add(decode_pp, "decode-pp", "PP stages of the decode instance (1 or prefill's)")
        .add(prefill_dp, "prefill-dp",
             "DP attention groups of the prefill instance (each of prefill-tp / prefill-dp "
             "ranks; a room goes to group room % prefill-dp)")
        .add(decode_dp, "decode-dp",
             "DP attention groups of the decode instance (a room goes to group room % decode-dp)")
        .add(page_size, "page-size", "tokens per KV page")
        .add(pool_pages, "pool-pages", "pages per KV buffer in each rank's pool")
        .add(aux_rows, "aux-rows", "aux rows per rank")
        .add(rooms, "rooms", "requests to move")
        .add(min_tokens, "min-tokens", "shortest prompt")
        .add(max_tokens, "max-tokens", "longest prompt")
        .add(chunk_pages, "chunk-pages", "pages per prefill chunk (0 = whole prompt at once)")
        .add(concurrency, "concurrency", "requests in flight per side")
        .add(seed, "seed", "seed of page orders, prompt lengths and KV bytes")
        .add(json, "json", "print one JSON summary line per side")
        .add(no_staging, "no-staging",
             "heterogeneous TP (MHA/GQA): write head slices per token instead of staging")
        .add(staging_mib, "staging-mib",
             "MiB of each decode rank's staging ring and each prefill rank's gather buffer")
        .add(checksum, "checksum",
             "end-to-end KV checksums the decode ranks check on every chunk: off or xxh3")
        .add(ranks, "ranks", "rank indices (tp + pp * tp-size) this process hosts, e.g. 1 or 0,1")
        .add(hold_mib, "hold-mib",
             "hold this many MiB of touched memory besides the pools (a model's weights, say; "
             "4 KiB pages): how long this process's death takes to read")
        .add(follow_requests, "follow-requests",
             "prefill, replacing a process that died: open the rooms of its share only as "
             "decode ranks ask for them")
        .add(join_bootstrap, "join-bootstrap",
             "prefill: join the bootstrap at --bootstrap-port instead of hosting one")
        .add(epoch_ns, "epoch-ns", "paced requests: room i opens at epoch + i * interval")
        .add(epoch_from_stdin, "epoch-from-stdin",
             "paced requests: once the ranks are up, print \"ready\" and read the epoch "
             "(nanoseconds) from a line of stdin; a harness starts the clock when every "
             "process is ready, however long their memory took to touch")
        .add(interval_us, "interval-us", "paced requests: microseconds between rooms")
        .add(print_conclusions, "print-conclusions",
             "print when each rank concluded each room, and how");
  }
};

/// The epoch a harness wrote: a positive decimal number of nanoseconds.
bool parse_epoch(const std::string& line, int64_t& out) {
  try {
    size_t used = 0;
    auto v = std::stoll(line, &used);
    if (used != line.size() || v <= 0)
      return false;
    out = v;
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

/// The run's workload; `epoch_ns` is --epoch-ns, or what stdin said.
workload workload_of(const demo_config& cfg, int64_t epoch_ns) {
  workload w;
  w.seed = cfg.seed;
  w.rooms = cfg.rooms;
  w.min_tokens = cfg.min_tokens;
  w.max_tokens = cfg.max_tokens;
  w.chunk_pages = cfg.chunk_pages;
  w.concurrency = cfg.concurrency;
  w.epoch_ns = epoch_ns;
  w.interval_us = cfg.interval_us;
  w.record_conclusions = cfg.print_conclusions;
  if (cfg.print_conclusions) {
    // A live line once this process saw its first room succeed on every
    // rank: a harness that strikes mid-run waits for it, so that its fault
    // lands while rooms move, however slowly the processes started.
    w.progress_period = std::chrono::milliseconds{20};
    w.on_progress = [said = false](const run_report& r) mutable {
      if (said || r.success == 0)
        return;
      said = true;
      std::cout << "first success " << wall_ns() << std::endl;
    };
  }
  if (cfg.follow_requests) {
    // A rank that came back joins the rooms decode still asks for; a room
    // decode gave up on while it was away is never opened here to wait out
    // its Bootstrapping deadline alone (scheduler_driver.hpp).
    w.follow_requests = true;
    if (cfg.interval_us > 0 && epoch_ns != 0)
      w.serve_until_ns = epoch_ns + int64_t{cfg.rooms} * cfg.interval_us * 1000 + 3'000'000'000;
  }
  return w;
}

/// The rank indices of --ranks, or every index below `count`; nullopt (with
/// the reason printed) for a list that names no rank of the instance.
std::optional<std::set<uint32_t>> ranks_to_host(const demo_config& cfg, uint32_t count) {
  std::set<uint32_t> out;
  if (cfg.ranks.empty()) {
    for (uint32_t i = 0; i < count; ++i)
      out.insert(i);
    return out;
  }
  std::stringstream in{cfg.ranks};
  for (std::string item; std::getline(in, item, ',');) {
    char* end = nullptr;
    auto v = std::strtoul(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v >= count) {
      std::cerr << "kvferry-demo: --ranks=" << cfg.ranks << ": \"" << item
                << "\" is not a rank index; expected numbers below " << count
                << " (tp + pp * tp-size), separated by commas\n";
      return std::nullopt;
    }
    out.insert(static_cast<uint32_t>(v));
  }
  return out;
}

/// Starts the ranks of an instance this process hosts.
caf::expected<hosted_ranks> start_instance(caf::actor_system& sys, const demo_config& cfg,
                                           role side, const std::string& name,
                                           const model_shape& shape, uint32_t tp, uint32_t pp,
                                           const std::set<uint32_t>& hosted,
                                           const bootstrap_locator& boot,
                                           const decider_locator& dec) {
  ranks_spec spec;
  spec.side = side;
  spec.instance = name;
  spec.tp = tp;
  spec.pp = pp;
  spec.hosted = hosted;
  spec.shape = shape;
  spec.page_size = cfg.page_size;
  spec.pool_pages = cfg.pool_pages;
  spec.aux_rows = cfg.aux_rows;
  spec.transport = cfg.transport;
  spec.listen_host = cfg.host;
  spec.limits = cfg.limits;
  spec.staging.enabled = !cfg.no_staging;
  spec.staging.ring_bytes = spec.staging.gather_bytes = uint64_t{cfg.staging_mib} << 20;
  spec.checksum = checksum_named(cfg.checksum).value_or(kv_checksum::off);
  spec.bootstrap = boot;
  spec.decider = dec;
  return start_ranks(sys, spec);
}

/// The conclusions `r` recorded (--print-conclusions), a line each.
void print_conclusions(const run_report& r, const std::string& side, const hosted_ranks& inst) {
  for (auto& c : r.conclusions) {
    std::cout << "conclusion " << to_string(inst.ranks[c.rank]->rank()) << " room " << c.room << " "
              << to_string(c.state) << " " << c.at_ns << " " << (c.why.empty() ? "-" : c.why)
              << "\n";
    // When this process's scheduler opened the room (once, with its first
    // rank's conclusion): a room is live from then, whatever its pacing said.
    if (c.rank == 0)
      std::cout << "opened " << side << " room " << c.room << " " << c.opened_ns << "\n";
  }
}

/// A side's report in words (and JSON with --json).
void print(const run_report& r, const std::string& side, const demo_config& cfg,
           const model_shape& shape) {
  std::cout << r.to_text(side) << "\n";
  if (cfg.json)
    std::printf(
        "{\"side\":\"%s\",\"model\":\"%s\",\"page_size\":%u,\"ranks\":%u,\"rooms\":%u,"
        "\"success\":%u,\"failed\":%u,\"verified\":%u,\"corrupted\":%u,\"disagreements\":%u,"
        "\"bytes\":%llu,\"seconds\":%.4f,\"gbps\":%.4f}\n",
        side.c_str(), shape.name.c_str(), cfg.page_size, r.ranks, r.rooms, r.success, r.failed,
        r.verified, r.corrupted, r.disagreements, static_cast<unsigned long long>(r.bytes),
        r.seconds, r.gbps());
  std::cout.flush();
}

/// Spawns the bootstrap of prefill instance (or DP group) `name` and
/// publishes it on loopback, on `port` (0: any free one).
std::optional<std::pair<bootstrap_actor, uint16_t>> publish_bootstrap(caf::actor_system& sys,
                                                                      const demo_config& cfg,
                                                                      const std::string& name,
                                                                      uint16_t port) {
  auto boot = sys.spawn(bootstrap, name, fresh_generation());
  auto bound = publish_actor(sys, boot, port, cfg.host);
  if (!bound) {
    std::cerr << "kvferry-demo: cannot publish the bootstrap of " << name << " on " << cfg.host
              << ":" << port << ": " << sys.render(bound.error()) << "\n";
    caf::anon_send_exit(boot, caf::exit_reason::kill);
    return std::nullopt;
  }
  return std::make_pair(boot, *bound);
}

/// The rooms of `w` that DP group `group` of `dp` takes (all of them for one
/// group): prefill by SGLang's resolution (room % dp, the router giving no
/// prefill_dp_rank), decode as the demo's router spreads them (room % dp).
workload share_of(workload w, uint32_t group, uint32_t dp, bool prefill) {
  if (dp <= 1)
    return w;
  std::vector<uint64_t> ids;
  for (uint32_t i = 0; i < w.count(); ++i) {
    auto room = w.room_id(i);
    auto g =
        prefill ? prefill_dp_group(room, dp, std::nullopt).group : static_cast<uint32_t>(room % dp);
    if (g == group)
      ids.push_back(room);
  }
  w.ids = std::move(ids);
  return w;
}

/// One DP group of a side this process hosts: its ranks and its report.
struct group_run {
  std::string name;
  uint32_t index = 0;
  hosted_ranks ranks;
  std::optional<run_report> report;
};

/// Prints each group's report (when there are several) and the side's.
int print_side(std::vector<group_run>& groups, const std::string& side, const demo_config& cfg,
               const model_shape& shape) {
  std::vector<run_report> reports;
  for (auto& g : groups) {
    if (!g.report)
      continue;
    if (groups.size() > 1)
      std::cout << g.report->to_text(side + " " + g.name) << "\n";
    print_conclusions(*g.report, groups.size() > 1 ? side + " " + g.name : side, g.ranks);
    reports.push_back(*g.report);
  }
  if (reports.empty())
    return 0;
  auto all = merged(reports);
  print(all, side, cfg, shape);
  return all.ok() ? 0 : 1;
}

/// Why the DP flags cannot run as given, or nullopt.
std::optional<std::string> dp_problem(const demo_config& cfg) {
  if (auto bad = check_dp_pair({cfg.prefill_tp, cfg.prefill_dp}, cfg.prefill_pp,
                               {cfg.decode_tp, cfg.decode_dp}, cfg.decode_pp))
    return "--prefill-tp/--prefill-dp and --decode-tp/--decode-dp: " + *bad;
  if ((cfg.prefill_dp > 1 || cfg.decode_dp > 1) && (cfg.role != "all" || !cfg.ranks.empty()))
    return "--prefill-dp=" + std::to_string(cfg.prefill_dp) +
           " --decode-dp=" + std::to_string(cfg.decode_dp) +
           ": DP groups run in one process only (--role=all, no --ranks); the launcher's "
           "cluster file does not split them over processes yet";
  return std::nullopt;
}

/// Starts the ranks of every DP group of one side into `out`; what did not
/// start (the group and the rank), or nullopt.
std::optional<std::string> start_groups(caf::actor_system& sys, const demo_config& cfg, role side,
                                        const model_shape& shape, const std::set<uint32_t>& hosted,
                                        const std::vector<bootstrap_locator>& boots,
                                        const std::vector<decider_actor>& deciders,
                                        std::vector<group_run>& out) {
  bool pre = side == role::prefill;
  auto dp = pre ? cfg.prefill_dp : cfg.decode_dp;
  auto tp = (pre ? cfg.prefill_tp : cfg.decode_tp) / dp;
  for (uint32_t g = 0; g < dp; ++g) {
    auto name = dp_group_instance(pre ? "prefill-0" : "decode-0", g, dp);
    std::set<uint32_t> mine = hosted;
    if (dp > 1) {
      mine.clear();
      for (uint32_t i = 0; i < tp * (pre ? cfg.prefill_pp : cfg.decode_pp); ++i)
        mine.insert(i);
    }
    auto made =
        start_instance(sys, cfg, side, name, shape, tp, pre ? cfg.prefill_pp : cfg.decode_pp, mine,
                       pre ? boots[g] : bootstrap_locator{},
                       pre ? decider_locator{} : decider_locator{deciders[g], "", 0});
    if (!made)
      return (dp > 1 ? name + " " : std::string{}) + sys.render(made.error());
    out.push_back(group_run{name, g, std::move(*made), std::nullopt});
  }
  return std::nullopt;
}

/// Reads the epoch from stdin (--epoch-from-stdin) into `w`; false with the
/// reason printed.
bool await_epoch(const demo_config& cfg, workload& w) {
  std::string line;
  int64_t epoch = 0;
  if (!std::getline(std::cin, line) || !parse_epoch(line, epoch)) {
    std::cerr << "kvferry-demo: --epoch-from-stdin read \"" << line
              << "\", expected the epoch in nanoseconds since 1970\n";
    return false;
  }
  w = workload_of(cfg, epoch);
  return true;
}

/// Drives every group of both sides until each room concluded.
void drive_all(std::vector<group_run>& pre, std::vector<group_run>& post, const workload& w,
               const std::vector<bootstrap_locator>& boots, const demo_config& cfg) {
  std::vector<std::thread> drivers;
  for (auto& g : pre)
    drivers.emplace_back([&g, &w, &cfg] {
      g.report = drive_prefill(g.ranks.view(), share_of(w, g.index, cfg.prefill_dp, true));
    });
  auto where_of = [&boots, &cfg](uint64_t room) {
    return boots[prefill_dp_group(room, cfg.prefill_dp, std::nullopt).group];
  };
  for (auto& g : post)
    drivers.emplace_back([&g, &w, &cfg, where_of] {
      g.report = drive_decode(g.ranks.view(), share_of(w, g.index, cfg.decode_dp, false), where_of);
    });
  for (auto& d : drivers)
    d.join();
}

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
