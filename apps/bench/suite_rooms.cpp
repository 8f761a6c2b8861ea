#include "apps/bench/suite_rooms.hpp"

#include "apps/bench/peer_lines.hpp"
#include "apps/bench/process_meters.hpp"

#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>

#include "actors/base/guard.hpp"
#include "actors/bootstrap/bootstrap_actor.hpp"
#include "actors/decision/decider_actor.hpp"
#include "actors/gateway/tls.hpp"
#include "actors/process/config.hpp"
#include "apps/bench/bench_report.hpp"
#include "apps/bench/kv_traffic.hpp"
#include "apps/common/child_process.hpp"
#include "apps/common/hosted_ranks.hpp"
#include "apps/common/scheduler_driver.hpp"

namespace kvferry::bench {

namespace {

using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

/// Bytes of the host pools of `inst`: the scheduler's KV and aux memory,
/// resident from the start (the pools are zero-filled), not kvferry's state.
double pool_bytes(const apps::instance_ranks& inst) {
  double total = 0;
  for (auto* pool : inst.pools)
    total += static_cast<double>(pool->page_bytes()) * pool->pages() +
             static_cast<double>(pool->aux_rows()) * pool->aux_row_bytes();
  return total;
}

/// What one poll() of a live room's handle costs, and the floor beside it:
/// an acquire load of an atomic, each timed over `n` calls in a row.
struct poll_cost {
  double poll_ns = 0;
  double load_ns = 0;
};

poll_cost time_poll(const apps::instance_ranks& inst, uint64_t room) {
  constexpr int n = 10'000'000;
  auto per_call = [&](auto&& call) {
    uint64_t sink = 0;
    auto t0 = clock_type::now();
    for (int i = 0; i < n; ++i)
      sink += call();
    auto ns = std::chrono::duration<double, std::nano>(clock_type::now() - t0).count() / n;
    if (sink == 1)  // keeps the loop; never true (room states are 0..4, n > 1)
      std::cerr << "";
    return ns;
  };
  auto handle = inst.ranks.front()->make_sender(room);  // open in Bootstrapping; cleared below
  std::atomic<uint32_t> word{1};
  poll_cost out;
  out.poll_ns = per_call([&] { return static_cast<uint64_t>(handle.poll()); });
  out.load_ns = per_call([&] { return uint64_t{word.load(std::memory_order_acquire)}; });
  return out;
}

/// One side's figures over one repetition.
struct side_figures {
  double cpu_us = 0;          ///< per room, the whole process
  double runtime_cpu_us = 0;  ///< per room, less the synthetic scheduler's thread
  double messages = 0;        ///< handled by its actors, per room
  double rss_peak = 0;        ///< bytes, pools excluded
  double rss_growth = 0;      ///< bytes per room concluded
};

/// What one side measured over one run of rooms: CPU, messages its actors
/// handled, and its resident set less the pools, sampled as rooms concluded.
/// Made and read on the thread that drives the rooms (the synthetic scheduler).
struct side_meter {
  double cpu0 = cpu_us();
  double driver_cpu0 = cpu_us(RUSAGE_THREAD);
  uint64_t messages0 = messages_handled().load();
  double pools = 0;
  double rss_peak = 0;
  std::vector<std::pair<double, double>> rss_by_rooms;  ///< (rooms concluded, bytes)

  explicit side_meter(const apps::instance_ranks& inst) : pools(pool_bytes(inst)) {}

  /// Hooks the sampling into `w` (every 20 ms while it runs).
  void sample(apps::workload& w) {
    w.progress_period = std::chrono::milliseconds{20};
    w.on_progress = [this](const apps::run_report& r) {
      auto rss = rss_bytes() - pools;
      rss_peak = std::max(rss_peak, rss);
      rss_by_rooms.emplace_back(r.success + r.failed, rss);
    };
  }
  /// Per room of `rooms`, since construction.
  side_figures figures(uint32_t rooms) const {
    double all = cpu_us() - cpu0, driver = cpu_us(RUSAGE_THREAD) - driver_cpu0;
    return side_figures{all / rooms, (all - driver) / rooms,
                        static_cast<double>(messages_handled().load() - messages0) / rooms,
                        rss_peak, rss_growth_per_room()};
  }

  /// Least-squares growth of the resident set per room concluded, over the
  /// samples after the first fifth of the rooms (allocators and caches warm).
  double rss_growth_per_room() const {
    if (rss_by_rooms.empty())
      return 0;
    double last = rss_by_rooms.back().first;
    std::vector<std::pair<double, double>> xs;
    for (auto& s : rss_by_rooms)
      if (s.first >= last / 5)
        xs.push_back(s);
    if (xs.size() < 2)
      return 0;
    double n = static_cast<double>(xs.size()), sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (auto& [x, y] : xs) {
      sx += x;
      sy += y;
      sxx += x * x;
      sxy += x * y;
    }
    double den = n * sxx - sx * sx;
    return den > 0 ? (n * sxy - sx * sy) / den : 0;
  }
};

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
  uint32_t page_tokens = 1;  ///< tokens per page, the room's one page (SGLang's default: 1)
  bool latencies = true;     ///< the drivers keep each room's latency (8 bytes a room)
  std::string policy;        ///< CAF's scheduler.policy on both sides ("": kvferry's default)
  uint32_t threads = 0;      ///< CAF's scheduler.max-threads on both sides (0: CAF's default)
  uint32_t max_rooms = deadlines{}.max_rooms;  ///< the decider's admission (kvferry.max-rooms)

  /// Applies the scheduler settings to a side's config.
  void schedule(kvferry::config& cfg) const {
    if (!policy.empty()) {
      if (policy != "sharing" && policy != "stealing")
        throw std::invalid_argument("--policy=" + policy + ": expected sharing or stealing");
      cfg.set("scheduler.policy", caf::atom_from_string(policy));
    }
    if (threads > 0)
      cfg.set("scheduler.max-threads", size_t{threads});
  }
  std::string transport = "tcp";

  /// The warm-up's workload (rep < 0) or repetition `rep`'s; both sides
  /// derive the same rooms from it.
  apps::workload workload(int rep) const {
    apps::workload w;
    w.min_tokens = w.max_tokens = page_tokens;  // one page
    w.chunk_pages = 0;
    w.concurrency = inflight;
    w.record_latencies = latencies;
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
    s.page_size = page_tokens;
    s.pool_pages = 2 * inflight + 16;
    s.aux_rows = inflight + 16;
    s.transport = transport;
    return s;
  }

  /// The prefill peer's command line, behind the words of
  /// KVFERRY_BENCH_PEER_PREFIX when set (a profiler, by its path:
  /// "/usr/bin/heaptrack", "/usr/bin/perf record -g").
  std::vector<std::string> peer_argv() const {
    std::vector<std::string> argv;
    if (const char* prefix = std::getenv("KVFERRY_BENCH_PEER_PREFIX")) {
      std::istringstream words{prefix};
      for (std::string w; words >> w;)
        argv.push_back(w);
    }
    for (auto& arg : own_argv())
      argv.push_back(std::move(arg));
    return argv;
  }

  std::vector<std::string> own_argv() const {
    return {self_exe(),
            "--peer=rooms-prefill",
            "--tp=" + std::to_string(tp),
            "--inflight=" + std::to_string(inflight),
            "--warmup=" + std::to_string(warmup),
            "--rooms=" + std::to_string(rooms),
            "--reps=" + std::to_string(reps),
            "--page-tokens=" + std::to_string(page_tokens),
            "--latencies=" + std::to_string(latencies ? 1 : 0),
            "--policy=" + policy,
            "--threads=" + std::to_string(threads),
            "--transport=" + transport};
  }
};

struct rep_result {
  double rooms_per_s = 0;
  uint32_t refused = 0;  ///< rooms refused at once (overloaded): admission, not a fault
  std::vector<double> latencies_us;
  side_figures decode, prefill;
};

/// The line a prefill peer prints after repetition `rep`, and its reading.
std::string measured_line(uint32_t rep, const side_figures& f) {
  std::ostringstream out;
  out << "measured rep=" << rep << " cpu_us=" << f.cpu_us << " runtime_cpu_us=" << f.runtime_cpu_us
      << " messages=" << f.messages << " rss_peak=" << f.rss_peak << " rss_growth=" << f.rss_growth;
  return out.str();
}

side_figures read_measured(const std::string& line) {
  auto number = [&](const std::string& key) { return number_after(line, key); };
  return side_figures{number("cpu_us"), number("runtime_cpu_us"), number("messages"),
                      number("rss_peak"), number("rss_growth")};
}

struct plan_result {
  std::vector<rep_result> reps;
  std::vector<double> rtt_us;
  std::optional<poll_cost> poll;  ///< one poll() on the prefill side
};

/// Rooms the decider refused at once (`overloaded`: the instance held as
/// many undecided rooms as it admits): counted apart, not a failure.
uint32_t refused_of(const apps::run_report& r) {
  auto i = r.failures.find("overloaded");
  return i == r.failures.end() ? 0 : i->second;
}

/// Every room succeeded, or was refused at once by admission.
bool served(const apps::run_report& r) {
  auto refused = refused_of(r);
  return r.failed == refused && r.corrupted == 0 && r.disagreements == 0 &&
         r.success + refused + r.skipped + (r.side_prefill ? r.rerouted : 0) == r.rooms;
}

void check(const apps::run_report& r, const std::string& what) {
  if (!served(r))
    throw std::runtime_error(what + ": " + r.to_text("decode"));
}

/// Runs `f` when it goes out of scope.
template <class F>
struct at_scope_exit {
  F f;
  ~at_scope_exit() { f(); }
};

plan_result run_plan(const plan& p) {
  apps::child_process peer{p.peer_argv()};
  auto port = await_bootstrap_port(peer, "rooms-prefill peer");
  bootstrap_locator where{{}, "127.0.0.1", port};

  kvferry::config cfg;
  p.schedule(cfg);
  caf::actor_system sys{cfg};
  auto dec = sys.spawn(decider, std::string{"rooms-decode"}, p.tp, 1u, fresh_generation(), [&] {
    deadlines d;
    d.max_rooms = p.max_rooms;
    return d;
  }());
  auto spec = p.spec(role::decode);
  spec.decider = decider_locator{dec, "", 0};
  auto ranks = apps::start_ranks(sys, spec);
  // The actor system's destructor waits for every actor: whatever ends this
  // plan, a throw included, stops them first.
  bool stopped = false;
  auto stop = [&] {
    if (std::exchange(stopped, true))
      return;
    if (ranks)
      ranks->stop();
    caf::anon_send_exit(dec, caf::exit_reason::kill);
  };
  at_scope_exit<decltype(stop)&> stop_on_exit{stop};
  if (!ranks)
    throw std::runtime_error("decode ranks: " + sys.render(ranks.error()));
  auto tag = "TP " + std::to_string(p.tp) + " -> " + std::to_string(p.tp) + ", " +
             std::to_string(p.inflight) + " in flight";

  plan_result out;
  // What the allocator kept from earlier plans goes back to the system, so
  // that this plan's resident set is its own.
  ::malloc_trim(0);
  if (p.warmup > 0)
    check(apps::drive_decode(ranks->view(), p.workload(-1), where), tag + ", warm-up");
  for (uint32_t rep = 0; rep < p.reps; ++rep) {
    auto w = p.workload(static_cast<int>(rep));
    side_meter meter{ranks->view()};
    meter.sample(w);
    auto r = apps::drive_decode(ranks->view(), w, where);
    check(r, tag);
    auto done = peer.wait_for_line(
        [&](auto& l) { return l.rfind("measured rep=" + std::to_string(rep) + " ", 0) == 0; },
        600s);
    if (!done)
      throw std::runtime_error("rooms-prefill peer did not report: " + peer.output());
    rep_result rr;
    rr.rooms_per_s = r.seconds > 0 ? r.rooms / r.seconds : 0;
    rr.refused = refused_of(r);
    rr.latencies_us = std::move(r.latencies_us);
    rr.decode = meter.figures(p.rooms);
    rr.prefill = read_measured(*done);
    out.reps.push_back(std::move(rr));
  }

  if (auto line = peer.wait_for_line([](auto& l) { return l.rfind("poll ", 0) == 0; }, 60s)) {
    out.poll = poll_cost{number_after(*line, "poll_ns"), number_after(*line, "load_ns")};
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
  stop();
  peer.close_stdin();
  if (peer.wait(30s) != 0)
    throw std::runtime_error("rooms-prefill peer failed: " + peer.output());
  return out;
}

/// The medians over repetitions of one plan, per side.
struct plan_summary {
  double rooms_per_s = 0;
  std::vector<double> latencies_us;
  side_figures decode, prefill;
};

plan_summary summarize(const plan_result& r) {
  std::vector<double> rate;
  std::vector<side_figures> dec, pre;
  plan_summary out;
  for (auto& rep : r.reps) {
    rate.push_back(rep.rooms_per_s);
    out.latencies_us.insert(out.latencies_us.end(), rep.latencies_us.begin(),
                            rep.latencies_us.end());
    dec.push_back(rep.decode);
    pre.push_back(rep.prefill);
  }
  auto side = [](const std::vector<side_figures>& xs) {
    auto of = [&](double side_figures::*field) {
      std::vector<double> v;
      for (auto& x : xs)
        v.push_back(x.*field);
      return median(v);
    };
    return side_figures{of(&side_figures::cpu_us), of(&side_figures::runtime_cpu_us),
                        of(&side_figures::messages), of(&side_figures::rss_peak),
                        of(&side_figures::rss_growth)};
  };
  out.rooms_per_s = median(rate);
  out.decode = side(dec);
  out.prefill = side(pre);
  return out;
}

/// The fields every figure of plan `p` carries.
void describe(figure& f, const plan& p) {
  f.suite = "rooms";
  f.reps = static_cast<int>(p.reps);
  f.extra["inflight"] = p.inflight;
  f.extra["tp"] = p.tp;
  f.extra["rooms_per_rep"] = p.rooms;
  f.extra["page_tokens"] = p.page_tokens;
  f.notes["mapping"] = std::to_string(p.tp) + "->" + std::to_string(p.tp);
  // tiny: 4 layers x 8 heads x 64 x bf16, K and V: 8 KiB per token.
  f.notes["room"] = "1 page of " + std::to_string(p.page_tokens) + " token(s), tiny (" +
                    std::to_string(8 * p.page_tokens) + " KiB over TP " + std::to_string(p.tp) +
                    ") + aux";
  f.notes["transport"] = p.transport;
  f.notes["scheduler"] = (p.policy.empty() ? std::string{"kvferry default"} : p.policy) +
                         (p.threads > 0 ? ", " + std::to_string(p.threads) + " thread(s)" : "");
}

/// A figure of plan `p` whose value is the sum of the two sides' figures.
figure both_sides(const plan& p, const std::string& metric, const std::string& unit, double decode,
                  double prefill) {
  figure f;
  describe(f, p);
  f.metric = metric;
  f.value = decode + prefill;
  f.unit = unit;
  f.extra["decode"] = decode;
  f.extra["prefill"] = prefill;
  return f;
}

plan_summary report(const args& a, const plan& p, const plan_result& r) {
  auto s = summarize(r);
  auto& lat = s.latencies_us;
  // 0 when the round trip could not be measured (no baseline then).
  double rtt = r.rtt_us.empty() ? 0 : percentile(r.rtt_us, 50);
  figure f;
  describe(f, p);
  f.metric = "rooms_per_s";
  f.value = s.rooms_per_s;
  f.unit = "rooms/s";
  if (rtt > 0) {
    // One CAF round trip after another: the rooms per second of a room that
    // cost exactly one round trip, unpipelined.
    f.baseline = 1e6 / rtt;
    f.baseline_name = "1 / CAF request/response round trip p50, same processes";
  }
  f.extra["p50_us"] = percentile(lat, 50);
  f.extra["p99_us"] = percentile(lat, 99);
  f.extra["decode_cpu_us_per_room"] = s.decode.cpu_us;
  f.extra["prefill_cpu_us_per_room"] = s.prefill.cpu_us;
  f.extra["decode_runtime_cpu_us_per_room"] = s.decode.runtime_cpu_us;
  f.extra["prefill_runtime_cpu_us_per_room"] = s.prefill.runtime_cpu_us;
  f.extra["messages_per_room"] = s.decode.messages + s.prefill.messages;
  uint32_t refused = 0;
  for (auto& rep : r.reps)
    refused += rep.refused;
  f.extra["rooms_refused"] = refused;
  print(f, a.json);

  figure l;
  describe(l, p);
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

  auto c = both_sides(p, "cpu_us_per_room", "us", s.decode.cpu_us, s.prefill.cpu_us);
  c.extra["decode_runtime"] = s.decode.runtime_cpu_us;
  c.extra["prefill_runtime"] = s.prefill.runtime_cpu_us;
  c.notes["cpu"] =
      "getrusage(RUSAGE_SELF) user+system of each whole process over the measured rooms, "
      "synthetic scheduler's polling, pattern writing and checking included; *_runtime: less "
      "the synthetic scheduler's own thread (RUSAGE_THREAD): kvferry's actors, transport and "
      "CAF's threads";
  print(c, a.json);

  if (r.poll) {
    figure q;
    describe(q, p);
    q.metric = "poll_ns";
    q.value = r.poll->poll_ns;
    q.unit = "ns";
    q.baseline = r.poll->load_ns;
    q.baseline_name = "an acquire load of a std::atomic, same loop";
    q.notes["how"] =
        "sender::poll() of a live room on a prefill rank, 10,000,000 calls in a row on the "
        "scheduler's thread";
    print(q, a.json);
  }

  auto m = both_sides(p, "messages_per_room", "messages", s.decode.messages, s.prefill.messages);
  m.notes["messages"] =
      "handlers and response callbacks run by kvferry's actors (ranks, decider, bootstrap, "
      "transfer, staging) on each side, timer ticks included, per room";
  print(m, a.json);
  return s;
}

/// Bytes of state per room in flight, each side: how the resident set (pools
/// excluded) at the peak of the plan with the most rooms in flight exceeds
/// the one with the fewest, per extra room in flight.
void report_state_bytes(const args& a, const plan& few, const plan_summary& at_few,
                        const plan& many, const plan_summary& at_many) {
  double extra = static_cast<double>(many.inflight) - few.inflight;
  if (extra <= 0)
    return;
  auto per_room = [&](const side_figures& lo, const side_figures& hi) {
    return (hi.rss_peak - lo.rss_peak) / extra;
  };
  auto f = both_sides(many, "state_bytes_per_inflight_room", "bytes",
                      per_room(at_few.decode, at_many.decode),
                      per_room(at_few.prefill, at_many.prefill));
  f.extra["inflight_low"] = few.inflight;
  f.extra["decode_rss_mb_low"] = at_few.decode.rss_peak / 1e6;
  f.extra["decode_rss_mb_high"] = at_many.decode.rss_peak / 1e6;
  f.extra["prefill_rss_mb_low"] = at_few.prefill.rss_peak / 1e6;
  f.extra["prefill_rss_mb_high"] = at_many.prefill.rss_peak / 1e6;
  f.notes["how"] =
      "peak resident set (/proc/self/statm, sampled every 20 ms, host pools excluded) with "
      "inflight rooms in flight less that with inflight_low, per extra room in flight";
  print(f, a.json);
}

/// Memory per room served: the resident set's least-squares growth per room
/// concluded over a long run (its first fifth left out), each side.
void report_rss_growth(const args& a, const plan& p, const plan_summary& s) {
  auto f = both_sides(p, "rss_growth_bytes_per_room", "bytes", s.decode.rss_growth,
                      s.prefill.rss_growth);
  f.extra["decode_rss_mb_peak"] = s.decode.rss_peak / 1e6;
  f.extra["prefill_rss_mb_peak"] = s.prefill.rss_peak / 1e6;
  f.notes["how"] =
      "resident set (/proc/self/statm, every 20 ms, host pools excluded) against rooms "
      "concluded, least-squares slope after the first fifth of the rooms; 0 is flat";
  print(f, a.json);
}

/// Rooms per second by rooms in flight (rows) and TP (columns), with the
/// same-run CAF round trip as rooms per second, for apps/bench/plot_rooms.gp.
void write_table(const std::string& path, const std::vector<uint32_t>& tps,
                 const std::map<uint32_t, std::map<uint32_t, double>>& by_inflight,
                 double rtt_rooms_per_s) {
  std::ofstream out{path};
  if (!out)
    throw std::runtime_error("--table=" + path + ": cannot write it");
  out << "inflight";
  for (auto tp : tps)
    out << " TP_" << tp << "->" << tp;
  out << " caf_round_trip\n";
  for (auto& [n, row] : by_inflight) {
    out << n;
    for (auto tp : tps) {
      auto v = row.find(tp);
      out << ' ';
      if (v == row.end())
        out << "NaN";
      else
        out << v->second;
    }
    out << ' ' << rtt_rooms_per_s << '\n';
  }
}

}  // namespace

int run_rooms_suite(const args& a) {
  bool quick = a.has("quick");
  auto tps = list_of(a, "tp", quick ? "1" : "1,4");
  auto inflight = list_of(a, "inflight", quick ? "1,8,64" : "1,8,64,512");
  auto rooms = static_cast<uint32_t>(a.get("rooms", quick ? 400u : 2000u));
  auto reps = static_cast<uint32_t>(a.get("reps", 1u));
  auto rss_rooms = static_cast<uint32_t>(a.get("rss-rooms", quick ? 0u : 100000u));
  auto configured = [&](uint32_t tp, uint32_t n) {
    plan p;
    p.tp = tp;
    p.inflight = n;
    // At least four windows measured, and one whole window of warm-up.
    p.rooms = std::max(rooms, 4 * n);
    p.warmup = static_cast<uint32_t>(a.get("warmup", std::max(50u, n)));
    p.reps = std::max(reps, 1u);
    p.page_tokens = static_cast<uint32_t>(a.get("page-tokens", 1u));
    p.policy = a.get("policy", std::string{});
    p.threads = static_cast<uint32_t>(a.get("threads", 0u));
    p.transport = a.get("transport", std::string{"tcp"});
    p.max_rooms = static_cast<uint32_t>(a.get("max-rooms", uint64_t{p.max_rooms}));
    return p;
  };
  std::map<uint32_t, std::map<uint32_t, double>> table;
  std::vector<double> rtts;
  int failed_plans = 0;
  for (auto tp : tps) {
    std::vector<std::pair<plan, plan_summary>> done;
    for (auto n : inflight) {
      auto p = configured(tp, n);
      // A plan whose rooms fail is said (its first errors) and the run goes
      // on with the next; the exit status tells.
      std::optional<plan_result> r;
      try {
        r = run_plan(p);
      } catch (const std::exception& e) {
        std::cerr << "kvferry-bench: " << e.what() << std::endl;
        ++failed_plans;
        continue;
      }
      rtts.insert(rtts.end(), r->rtt_us.begin(), r->rtt_us.end());
      done.emplace_back(p, report(a, p, *r));
      table[n][tp] = done.back().second.rooms_per_s;
    }
    if (done.empty())
      continue;
    auto [few, many] = std::minmax_element(done.begin(), done.end(), [](auto& x, auto& y) {
      return x.first.inflight < y.first.inflight;
    });
    report_state_bytes(a, few->first, few->second, many->first, many->second);
  }
  if (a.has("table"))
    write_table(a.get("table", std::string{}), tps, table,
                rtts.empty() ? 0 : 1e6 / percentile(rtts, 50));
  if (rss_rooms > 0) {
    auto p = configured(tps.front(), 64);
    p.rooms = rss_rooms;
    p.reps = 1;
    p.latencies = false;  // the drivers' own record would grow 8 bytes a room
    report_rss_growth(a, p, summarize(run_plan(p)));
  }
  return failed_plans == 0 ? 0 : 1;
}

int run_rooms_prefill_peer(const args& a) {
  plan p;
  p.tp = static_cast<uint32_t>(a.get("tp", 1u));
  p.inflight = static_cast<uint32_t>(a.get("inflight", 1u));
  p.warmup = static_cast<uint32_t>(a.get("warmup", 0u));
  p.rooms = static_cast<uint32_t>(a.get("rooms", 100u));
  p.reps = static_cast<uint32_t>(a.get("reps", 1u));
  p.page_tokens = static_cast<uint32_t>(a.get("page-tokens", 1u));
  p.latencies = a.get("latencies", 1u) != 0;
  p.policy = a.get("policy", std::string{});
  p.threads = static_cast<uint32_t>(a.get("threads", 0u));
  p.transport = a.get("transport", std::string{"tcp"});
  kvferry::config cfg;
  p.schedule(cfg);
  caf::actor_system sys{cfg};
  auto boot = sys.spawn(bootstrap, std::string{"rooms-prefill"}, fresh_generation());
  std::optional<apps::hosted_ranks> ranks;
  auto stop = [&] {  // before the actor system's destructor waits for them
    if (ranks)
      ranks->stop();
    caf::anon_send_exit(boot, caf::exit_reason::kill);
  };
  at_scope_exit<decltype(stop)&> stop_on_exit{stop};
  auto port = publish_actor(sys, boot, 0, "127.0.0.1");
  if (!port)
    throw std::runtime_error(sys.render(port.error()));
  auto spec = p.spec(role::prefill);
  spec.bootstrap = bootstrap_locator{{}, "127.0.0.1", *port};
  auto started = apps::start_ranks(sys, spec);
  if (!started)
    throw std::runtime_error("prefill ranks: " + sys.render(started.error()));
  ranks = std::move(*started);
  std::cout << "ready bootstrap=" << *port << std::endl;
  bool ok = true;
  if (p.warmup > 0)
    ok = served(apps::drive_prefill(ranks->view(), p.workload(-1)));
  for (uint32_t rep = 0; ok && rep < p.reps; ++rep) {
    auto w = p.workload(static_cast<int>(rep));
    side_meter meter{ranks->view()};
    meter.sample(w);
    auto r = apps::drive_prefill(ranks->view(), w);
    ok = served(r);
    if (!ok)
      std::cout << r.to_text("prefill") << std::endl;
    std::cout << measured_line(rep, meter.figures(p.rooms)) << std::endl;
  }
  if (ok) {
    // A room id no workload uses.
    auto cost = time_poll(ranks->view(), uint64_t{1} << 62);
    std::cout << "poll poll_ns=" << cost.poll_ns << " load_ns=" << cost.load_ns << std::endl;
  }
  wait_for_parent();  // it measures CAF's round trip against our bootstrap next
  return ok ? 0 : 1;
}

}  // namespace kvferry::bench
