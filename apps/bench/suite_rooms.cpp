#include "apps/bench/suite_rooms.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <optional>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>

#include "actors/bootstrap/bootstrap_actor.hpp"
#include "actors/config.hpp"
#include "actors/decision/decider_actor.hpp"
#include "actors/tls.hpp"
#include "apps/bench/bench_report.hpp"
#include "apps/bench/kv_traffic.hpp"
#include "apps/common/child_process.hpp"
#include "apps/common/hosted_ranks.hpp"
#include "apps/common/scheduler_driver.hpp"

namespace kvferry::bench {

namespace {

using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

/// CPU time (user + system) of this whole process so far, in microseconds.
double cpu_us() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto us = [](const timeval& t) { return t.tv_sec * 1e6 + static_cast<double>(t.tv_usec); };
  return us(u.ru_utime) + us(u.ru_stime);
}

/// The numbers of a comma-separated option ("1,8,64").
std::vector<uint32_t> list_of(const args& a, const std::string& key, const std::string& fallback) {
  std::vector<uint32_t> out;
  std::stringstream ss{a.get(key, fallback)};
  for (std::string item; std::getline(ss, item, ',');) {
    try {
      size_t used = 0;
      auto v = std::stoul(item, &used);
      if (used != item.size() || v == 0)
        throw std::invalid_argument(item);
      out.push_back(static_cast<uint32_t>(v));
    } catch (const std::exception&) {
      throw std::invalid_argument("--" + key + "=" + a.get(key, fallback) +
                                  ": expected positive numbers separated by commas");
    }
  }
  return out;
}

/// One configuration: TP on both sides, rooms in flight, how many rooms.
struct plan {
  uint32_t tp = 1;
  uint32_t inflight = 1;
  uint32_t warmup = 0;
  uint32_t rooms = 0;  ///< measured rooms per repetition
  uint32_t reps = 1;
  std::string transport = "tcp";

  /// The warm-up's workload (rep < 0) or repetition `rep`'s; both sides
  /// derive the same rooms from it.
  apps::workload workload(int rep) const {
    apps::workload w;
    w.min_tokens = w.max_tokens = 16;  // one page of 16 tokens
    w.chunk_pages = 0;
    w.concurrency = inflight;
    if (rep < 0) {
      w.first_room = 1;
      w.rooms = warmup;
    } else {
      w.first_room = 1 + warmup + static_cast<uint64_t>(rep) * rooms;
      w.rooms = rooms;
    }
    return w;
  }

  apps::ranks_spec spec(role side) const {
    apps::ranks_spec s;
    s.side = side;
    s.instance = side == role::prefill ? "rooms-prefill" : "rooms-decode";
    s.tp = tp;
    s.shape = apps::model_shape{"tiny", 4, 8, 64, kv_dtype::bf16, false};
    s.page_size = 16;
    s.pool_pages = 2 * inflight + 16;
    s.aux_rows = inflight + 16;
    s.transport = transport;
    return s;
  }

  std::vector<std::string> peer_argv() const {
    return {self_exe(),
            "--peer=rooms-prefill",
            "--tp=" + std::to_string(tp),
            "--inflight=" + std::to_string(inflight),
            "--warmup=" + std::to_string(warmup),
            "--rooms=" + std::to_string(rooms),
            "--reps=" + std::to_string(reps),
            "--transport=" + transport};
  }
};

struct rep_result {
  double rooms_per_s = 0;
  std::vector<double> latencies_us;
  double decode_cpu_us = 0;   ///< per room
  double prefill_cpu_us = 0;  ///< per room
};

struct plan_result {
  std::vector<rep_result> reps;
  std::vector<double> rtt_us;
};

void check(const apps::run_report& r, const std::string& what) {
  if (!r.ok())
    throw std::runtime_error(what + ": " + r.to_text("decode"));
}

plan_result run_plan(const plan& p) {
  apps::child_process peer{p.peer_argv()};
  auto line = peer.wait_for_line([](auto& l) { return l.rfind("ready ", 0) == 0; }, 60s);
  std::smatch m;
  if (!line || !std::regex_search(*line, m, std::regex{R"(bootstrap=(\d+))"}))
    throw std::runtime_error("rooms-prefill peer did not start: " + peer.output());
  auto port = static_cast<uint16_t>(std::stoul(m[1]));
  bootstrap_locator where{{}, "127.0.0.1", port};

  kvferry::config cfg;
  caf::actor_system sys{cfg};
  auto dec =
      sys.spawn(decider, std::string{"rooms-decode"}, p.tp, 1u, fresh_generation(), deadlines{});
  auto spec = p.spec(role::decode);
  spec.decider = decider_locator{dec, "", 0};
  auto ranks = apps::start_ranks(sys, spec);
  if (!ranks)
    throw std::runtime_error("decode ranks: " + sys.render(ranks.error()));
  auto tag = "TP " + std::to_string(p.tp) + " -> " + std::to_string(p.tp) + ", " +
             std::to_string(p.inflight) + " in flight";

  plan_result out;
  if (p.warmup > 0)
    check(apps::drive_decode(ranks->view(), p.workload(-1), where), tag + ", warm-up");
  for (uint32_t rep = 0; rep < p.reps; ++rep) {
    auto c0 = cpu_us();
    auto r = apps::drive_decode(ranks->view(), p.workload(static_cast<int>(rep)), where);
    auto c1 = cpu_us();
    check(r, tag);
    auto done = peer.wait_for_line(
        [&](auto& l) { return l.rfind("measured rep=" + std::to_string(rep) + " ", 0) == 0; },
        120s);
    std::smatch cm;
    if (!done || !std::regex_search(*done, cm, std::regex{R"(cpu_us=([0-9.eE+-]+))"}))
      throw std::runtime_error("rooms-prefill peer did not report: " + peer.output());
    rep_result rr;
    rr.rooms_per_s = r.seconds > 0 ? r.rooms / r.seconds : 0;
    rr.latencies_us = std::move(r.latencies_us);
    rr.decode_cpu_us = (c1 - c0) / p.rooms;
    rr.prefill_cpu_us = std::stod(cm[1]) / p.rooms;
    out.reps.push_back(std::move(rr));
  }

  // Baseline: CAF's request/response round trip between the same processes.
  auto boot = find_published<bootstrap_actor>(sys, "127.0.0.1", port, 10s);
  if (boot) {
    caf::scoped_actor self{sys};
    bool ok = true;
    for (uint32_t i = 0; ok && i < 300; ++i) {
      auto t0 = clock_type::now();
      self->request(*boot, 5s, topology_atom_v)
          .receive([](topology&) {}, [&](caf::error&) { ok = false; });
      if (ok && i >= 20)
        out.rtt_us.push_back(
            std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
    }
  }
  ranks->stop();
  caf::anon_send_exit(dec, caf::exit_reason::kill);
  peer.close_stdin();
  if (peer.wait(30s) != 0)
    throw std::runtime_error("rooms-prefill peer failed: " + peer.output());
  return out;
}

void report(const args& a, const plan& p, const plan_result& r) {
  std::vector<double> rate, lat, dcpu, pcpu;
  for (auto& rep : r.reps) {
    rate.push_back(rep.rooms_per_s);
    lat.insert(lat.end(), rep.latencies_us.begin(), rep.latencies_us.end());
    dcpu.push_back(rep.decode_cpu_us);
    pcpu.push_back(rep.prefill_cpu_us);
  }
  // 0 when the round trip could not be measured (no baseline then).
  double rtt = r.rtt_us.empty() ? 0 : percentile(r.rtt_us, 50);
  auto mapping = std::to_string(p.tp) + "->" + std::to_string(p.tp);
  auto common = [&](figure& f) {
    f.suite = "rooms";
    f.reps = static_cast<int>(p.reps);
    f.extra["inflight"] = p.inflight;
    f.extra["tp"] = p.tp;
    f.extra["rooms_per_rep"] = p.rooms;
    f.notes["mapping"] = mapping;
    f.notes["room"] = "1 page of 16 tokens, tiny (4 layers x 8 heads x 64, bf16, 128 KiB) + aux";
    f.notes["transport"] = p.transport;
  };
  figure f;
  common(f);
  f.metric = "rooms_per_s";
  f.value = median(rate);
  f.unit = "rooms/s";
  if (rtt > 0) {
    // One CAF round trip after another: the rooms per second of a room that
    // cost exactly one round trip, unpipelined.
    f.baseline = 1e6 / rtt;
    f.baseline_name = "1 / CAF request/response round trip p50, same processes";
  }
  f.extra["p50_us"] = percentile(lat, 50);
  f.extra["p99_us"] = percentile(lat, 99);
  f.extra["decode_cpu_us_per_room"] = median(dcpu);
  f.extra["prefill_cpu_us_per_room"] = median(pcpu);
  f.notes["control_messages_per_room"] = "not counted";
  print(f, a.json);

  figure l;
  common(l);
  l.metric = "room_latency_p50_us";
  l.value = percentile(lat, 50);
  l.unit = "us";
  if (rtt > 0) {
    l.baseline = rtt;
    l.baseline_name = "CAF request/response round trip p50, same processes";
  }
  l.extra["p99_us"] = percentile(lat, 99);
  l.extra["samples"] = static_cast<double>(lat.size());
  print(l, a.json);

  figure c;
  common(c);
  c.metric = "cpu_us_per_room";
  c.value = median(dcpu) + median(pcpu);
  c.unit = "us";
  c.extra["decode"] = median(dcpu);
  c.extra["prefill"] = median(pcpu);
  c.notes["cpu"] =
      "getrusage(RUSAGE_SELF) user+system of each whole process over the measured rooms, "
      "synthetic scheduler's polling included";
  print(c, a.json);
}

}  // namespace

int run_rooms_suite(const args& a) {
  bool quick = a.has("quick");
  auto tps = list_of(a, "tp", quick ? "1" : "1,4");
  auto inflight = list_of(a, "inflight", quick ? "1,8,64" : "1,8,64,512");
  auto rooms = static_cast<uint32_t>(a.get("rooms", quick ? 400u : 2000u));
  auto reps = static_cast<uint32_t>(a.get("reps", 1u));
  for (auto tp : tps)
    for (auto n : inflight) {
      plan p;
      p.tp = tp;
      p.inflight = n;
      // At least four windows measured, and one whole window of warm-up.
      p.rooms = std::max(rooms, 4 * n);
      p.warmup = static_cast<uint32_t>(a.get("warmup", std::max(50u, n)));
      p.reps = std::max(reps, 1u);
      p.transport = a.get("transport", std::string{"tcp"});
      report(a, p, run_plan(p));
    }
  return 0;
}

int run_rooms_prefill_peer(const args& a) {
  plan p;
  p.tp = static_cast<uint32_t>(a.get("tp", 1u));
  p.inflight = static_cast<uint32_t>(a.get("inflight", 1u));
  p.warmup = static_cast<uint32_t>(a.get("warmup", 0u));
  p.rooms = static_cast<uint32_t>(a.get("rooms", 100u));
  p.reps = static_cast<uint32_t>(a.get("reps", 1u));
  p.transport = a.get("transport", std::string{"tcp"});
  kvferry::config cfg;
  caf::actor_system sys{cfg};
  auto boot = sys.spawn(bootstrap, std::string{"rooms-prefill"}, fresh_generation());
  auto port = publish_actor(sys, boot, 0, "127.0.0.1");
  if (!port)
    throw std::runtime_error(sys.render(port.error()));
  auto spec = p.spec(role::prefill);
  spec.bootstrap = bootstrap_locator{{}, "127.0.0.1", *port};
  auto ranks = apps::start_ranks(sys, spec);
  if (!ranks)
    throw std::runtime_error("prefill ranks: " + sys.render(ranks.error()));
  std::cout << "ready bootstrap=" << *port << std::endl;
  bool ok = true;
  if (p.warmup > 0)
    ok = apps::drive_prefill(ranks->view(), p.workload(-1)).ok();
  for (uint32_t rep = 0; ok && rep < p.reps; ++rep) {
    auto c0 = cpu_us();
    auto r = apps::drive_prefill(ranks->view(), p.workload(static_cast<int>(rep)));
    auto c1 = cpu_us();
    ok = r.ok();
    if (!ok)
      std::cout << r.to_text("prefill") << std::endl;
    std::cout << "measured rep=" << rep << " cpu_us=" << (c1 - c0) << std::endl;
  }
  wait_for_parent();  // it measures CAF's round trip against our bootstrap next
  ranks->stop();
  caf::anon_send_exit(boot, caf::exit_reason::kill);
  return ok ? 0 : 1;
}

}  // namespace kvferry::bench
