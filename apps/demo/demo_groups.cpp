// kvferry-demo's instances and their DP groups (demo_groups.hpp).
#include "apps/demo/demo_groups.hpp"

#include <cstdio>
#include <iostream>
#include <thread>

#include <caf/io/middleman.hpp>

#include "actors/bootstrap/bootstrap_actor.hpp"
#include "actors/gateway/tls.hpp"
#include "actors/plan/dp_groups.hpp"

namespace kvferry::demo {

namespace {

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

}  // namespace

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

namespace {

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

}  // namespace

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
  // One process knows both sides' shapes; a side of its own learns the
  // other's at the handshake, which refuses what does not pair.
  auto bad = cfg.role == "all" ? check_dp_pair({cfg.prefill_tp, cfg.prefill_dp}, cfg.prefill_pp,
                                               {cfg.decode_tp, cfg.decode_dp}, cfg.decode_pp)
             : cfg.role == "prefill" ? validate(dp_shape{cfg.prefill_tp, cfg.prefill_dp}, "prefill")
                                     : validate(dp_shape{cfg.decode_tp, cfg.decode_dp}, "decode");
  if (bad)
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

}  // namespace kvferry::demo
