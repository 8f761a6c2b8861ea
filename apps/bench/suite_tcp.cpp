#include "apps/bench/suite_tcp.hpp"

#include "apps/bench/peer_lines.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <numeric>
#include <optional>
#include <random>
#include <regex>
#include <thread>

#include <caf/actor_system.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>

#include "actors/bootstrap/bootstrap_actor.hpp"
#include "actors/facade/runtime.hpp"
#include "actors/gateway/tls.hpp"
#include "actors/metrics/exposition.hpp"
#include "actors/metrics/process_figures.hpp"
#include "actors/metrics/rank_figures.hpp"
#include "actors/plan/planner.hpp"
#include "actors/process/config.hpp"
#include "apps/bench/bench_report.hpp"
#include "apps/bench/kv_traffic.hpp"
#include "apps/common/child_process.hpp"
#include "apps/common/host_pool.hpp"
#include "apps/common/scheduler_driver.hpp"
#include "transport/base/posix_socket.hpp"
#include "transport/registry.hpp"

namespace kvferry::bench {

namespace {

using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

void bandwidth(const args& a) {
  auto reps = static_cast<int>(a.get("reps", a.has("quick") ? 3 : 5));
  auto pages = static_cast<uint32_t>(a.get("pages", 64));
  auto chunk = static_cast<uint32_t>(a.get("chunk-pages", 16));
  auto bytes = a.get("bytes", (a.has("quick") ? 256ull : 1024ull) << 20);
  auto shape = bandwidth_shape();
  apps::host_pool pool{shape, 16, pages, 0};
  for (uint32_t b = 0; b < pool.buffers(); ++b)
    for (uint32_t p = 0; p < pages; ++p)
      std::memset(pool.page(b, p), static_cast<int>(b * 7 + p), pool.item_len());

  // The guarded sender's endpoint is fixed first: the sink grants to it.
  uint16_t guarded_port = 0;
  {
    auto probe = transport::listen_on("127.0.0.1", 0);
    if (!probe.ok())
      throw std::runtime_error(probe.error().to_string());
    guarded_port = probe->second;
  }
  auto guarded_name = transport::format_endpoint("tcp", "127.0.0.1", guarded_port);
  apps::child_process sink{{self_exe(), "--peer=tcp-sink", "--pages=" + std::to_string(pages),
                            "--grant-to=" + guarded_name}};
  auto line = sink.wait_for_line([](auto& l) { return l.rfind("ready ", 0) == 0; }, 60s);
  std::smatch m;
  if (!line || !std::regex_search(
                   *line, m, std::regex{R"(ready (\S+) raw=(\d+) guarded=(\S+) credential=(\S+))"}))
    throw std::runtime_error("tcp-sink peer did not start: " + sink.output());
  std::string endpoint = m[1];
  auto raw_port = static_cast<uint16_t>(std::stoul(m[2]));

  // Two senders of the same pool: one to a receiver that trusts it, one
  // that proves its credential and writes only into what its fence grants.
  transport::options trusted;
  trusted.trust_every_peer = true;
  auto net = std::move(transport::make_transport("tcp", trusted)).value();
  transport::options guarded_opts;
  guarded_opts.listen_port = guarded_port;
  auto guarded = std::move(transport::make_transport("tcp", guarded_opts)).value();
  for (uint32_t b = 0; b < pool.buffers(); ++b) {
    (void)*net->register_region(pool.page(b, 0), pool.item_len() * pages);
    (void)*guarded->register_region(pool.page(b, 0), pool.item_len() * pages);
  }
  round_counter rc, grc;
  net->set_completion_handler(rc.handler());
  guarded->set_completion_handler(grc.handler());
  auto peer = *net->connect(endpoint);
  auto guarded_peer = *guarded->connect(m[3], m[4]);
  auto layout = registered_layout(pool);
  auto raw = transport::connect_to({"127.0.0.1", raw_port}, 5000);
  if (!raw.ok())
    throw std::runtime_error("raw baseline: " + raw.error().to_string());

  std::mt19937 rng{42};
  uint64_t writes = 0;
  // One unmeasured round each, then alternate so both see the same machine.
  constexpr uint64_t granted_fence = 1;
  uint64_t ignored = 0;
  transport_round(*net, peer, layout, layout, bytes / 4, chunk, 2, rng, rc, writes);
  transport_round(*guarded, guarded_peer, layout, layout, bytes / 4, chunk, 2, rng, grc, ignored,
                  granted_fence);
  raw_round(raw->get(), pool, bytes / 4);
  writes = 0;
  std::vector<double> kv, granted, base;
  for (int r = 0; r < reps; ++r) {
    kv.push_back(transport_round(*net, peer, layout, layout, bytes, chunk, 2, rng, rc, writes));
    granted.push_back(transport_round(*guarded, guarded_peer, layout, layout, bytes, chunk, 2, rng,
                                      grc, ignored, granted_fence));
    base.push_back(raw_round(raw->get(), pool, bytes));
  }
  figure f;
  f.suite = "tcp";
  f.metric = "tcp_bandwidth";
  f.value = median(kv);
  f.unit = "GB/s";
  f.baseline = median(base);
  f.baseline_name = "raw TCP stream, same processes";
  f.reps = reps;
  f.extra["bytes_per_rep"] = static_cast<double>(bytes);
  f.extra["writes_per_batch"] =
      static_cast<double>(writes) / reps /
      std::max<uint64_t>(1, bytes / (uint64_t{chunk} * pool.page_bytes()));
  f.extra["min"] = *std::min_element(kv.begin(), kv.end());
  f.extra["max"] = *std::max_element(kv.begin(), kv.end());
  f.notes["shape"] = shape.name + ", page 16, " + std::to_string(chunk) +
                     " random pages per batch, 2 batches in flight";
  print(f, a.json);

  // What admission costs: the same traffic, authenticated and checked
  // against its grant (every op against the granted pages), beside the
  // trusting run.
  figure g;
  g.suite = "tcp";
  g.metric = "tcp_bandwidth_admission";
  g.value = median(granted);
  g.unit = "GB/s";
  g.baseline = median(kv);
  g.baseline_name = "the same sender and pages, receiver trusting every peer";
  g.reps = reps;
  g.extra["min"] = *std::min_element(granted.begin(), granted.end());
  g.extra["max"] = *std::max_element(granted.begin(), granted.end());
  g.notes["admission"] =
      "challenge and response at connect, every op checked against the "
      "pages its fence grants";
  print(g, a.json);
  sink.close_stdin();
  sink.wait(10s);
}

/// The TLS files of a bench run under `dir`: one self-signed certificate
/// that both processes show and trust (one CA of one certificate), made with
/// the openssl command. Nothing when the command is missing or fails.
tls_files files_in(const std::string& dir) {
  return tls_files{dir + "/bench.pem", dir + "/bench.key", dir + "/bench.pem", {}};
}

std::optional<tls_files> bench_certificate(const std::string& dir) {
  auto files = files_in(dir);
  auto &cert = files.certificate, &key = files.key;
  auto cmd =
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 "
      "-subj /CN=kvferry-bench -addext subjectAltName=IP:127.0.0.1 -keyout " +
      key + " -out " + cert + " >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0)
    return std::nullopt;
  return files;
}

/// The files a peer gets from --tls-dir (made by bench_certificate).
std::optional<tls_files> tls_of(const args& a) {
  auto dir = a.get("tls-dir", std::string{});
  if (dir.empty())
    return std::nullopt;
  return files_in(dir);
}

/// p50 of one small room across two processes (and CAF's own round trip
/// between them, the baseline), with the control plane over TLS or not.
struct room_figures {
  std::vector<double> rooms;
  std::vector<double> rtt;
};

/// With `metrics`, both sides keep their figures for Prometheus (as every
/// kvferry-launch node does), and the decode side renders them once a
/// second as a scrape would.
room_figures room_latency_run(const args& a, const std::optional<std::string>& tls_dir,
                              bool metrics = false, bool guard = true) {
  auto samples = static_cast<uint32_t>(a.get("rooms", a.has("quick") ? 200 : 1000));
  auto warmup = 50u;
  std::vector<std::string> argv{self_exe(), "--peer=prefill-rooms",
                                "--rooms=" + std::to_string(samples + warmup)};
  if (tls_dir)
    argv.push_back("--tls-dir=" + *tls_dir);
  if (metrics)
    argv.push_back("--metrics");
  if (!guard)
    argv.push_back("--no-caf-port-guard");
  set_caf_port_guard(guard);  // this side's published ports, as the peer's
  apps::child_process peer{argv};
  auto port = await_bootstrap_port(peer, "prefill-rooms peer");

  kvferry::config cfg;
  if (tls_dir)
    enable_tls(cfg, files_in(*tls_dir));
  caf::actor_system sys{cfg};
  apps::workload w = apps::workload{};
  w.rooms = samples + warmup;
  w.min_tokens = w.max_tokens = 16;
  apps::host_pool pool{apps::model_shape{"tiny", 4, 8, 64, kv_dtype::bf16, false}, 16, 16, 4};
  rank_options o;
  o.side = role::decode;
  o.instance = "bench-decode";
  o.pool = pool.describe();
  o.transport = "tcp";  // this suite measures the tcp backend (the default is auto)
  if (metrics)
    o.metrics = std::make_shared<metrics::registry>();
  auto figures = o.metrics;
  auto rt = runtime::start(sys, std::move(o));
  if (!rt)
    throw std::runtime_error(sys.render(rt.error()));
  bootstrap_locator where{{}, "127.0.0.1", port};
  std::atomic<bool> scraping{metrics};
  std::thread scraper{[&] {
    while (scraping) {
      (void)metrics::render(figures->collect());
      std::this_thread::sleep_for(1s);
    }
  }};

  std::vector<double> lat;
  for (uint32_t i = 0; i < w.rooms; ++i) {
    auto t0 = clock_type::now();
    auto r = (*rt)->make_receiver(w.room_id(i), where);
    r.init({i % 16}, i % 4);
    kv_poll s;
    while (!is_terminal(s = r.poll()))
      std::this_thread::yield();
    auto us = std::chrono::duration<double, std::micro>(clock_type::now() - t0).count();
    if (s != kv_poll::success) {
      scraping = false;
      scraper.join();
      throw std::runtime_error("room " + std::to_string(w.room_id(i)) +
                               " failed: " + r.failure()->what());
    }
    if (i >= warmup)
      lat.push_back(us);
  }

  // Baseline: CAF's request/response round trip between the same processes.
  auto boot = find_published<bootstrap_actor>(sys, "127.0.0.1", port, 10s);
  std::vector<double> rtt;
  if (boot) {
    caf::scoped_actor self{sys};
    bool ok = true;
    for (uint32_t i = 0; ok && i < std::min(samples, 500u); ++i) {
      auto t0 = clock_type::now();
      self->request(*boot, 5s, topology_atom_v)
          .receive([](topology&) {}, [&](caf::error&) { ok = false; });
      if (ok)
        rtt.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
    }
  }
  scraping = false;
  scraper.join();
  (*rt)->stop();
  peer.close_stdin();
  if (peer.wait(30s) != 0)
    throw std::runtime_error("prefill-rooms peer failed: " + peer.output());
  return {std::move(lat), std::move(rtt)};
}

/// A room's latency with a feature on against off, in `pairs` pairs of runs
/// in alternating order (off then on, on then off, ...), so that neither side
/// always runs warmer: the median of each side's p50 and p99. `run(on)` is
/// one run; `what` names the feature in the figure's keys.
template <class Run>
figure on_against_off(const std::string& metric, const std::string& what, int pairs, Run run) {
  std::vector<double> off_p50, on_p50, off_p99, on_p99;
  size_t counted_rooms = 0;
  for (int k = 0; k < pairs; ++k)
    for (bool on : {k % 2 == 1, k % 2 == 0}) {
      auto r = run(on);
      (on ? on_p50 : off_p50).push_back(percentile(r.rooms, 50));
      (on ? on_p99 : off_p99).push_back(percentile(r.rooms, 99));
      counted_rooms += on ? r.rooms.size() : 0;
    }
  figure f;
  f.suite = "tcp";
  f.metric = metric;
  f.value = percentile(on_p50, 50);
  f.unit = "us";
  f.baseline = percentile(off_p50, 50);
  f.baseline_name = "room latency p50 with " + what + " off, same run (median of alternating runs)";
  f.reps = static_cast<int>(counted_rooms);
  f.extra["pairs"] = pairs;
  f.extra["p50"] = percentile(on_p50, 50);
  f.extra["p99"] = percentile(on_p99, 50);
  f.extra["p50_" + what + "_off"] = percentile(off_p50, 50);
  f.extra["p99_" + what + "_off"] = percentile(off_p99, 50);
  return f;
}

void room_latency(const args& a) {
  const std::string room = "1 page of 16 tokens, 4 layers x 8 heads x 64 (128 KiB) + 64 B aux";
  auto plain = room_latency_run(a, std::nullopt);
  figure f;
  f.suite = "tcp";
  f.metric = "room_latency_us";
  f.value = percentile(plain.rooms, 50);
  f.unit = "us";
  if (!plain.rtt.empty()) {
    f.baseline = percentile(plain.rtt, 50);
    f.baseline_name = "CAF request/response round trip p50, same processes";
  }
  f.reps = static_cast<int>(plain.rooms.size());
  f.extra["p50"] = percentile(plain.rooms, 50);
  f.extra["p99"] = percentile(plain.rooms, 99);
  f.notes["room"] = room;
  print(f, a.json);

  // The same with Prometheus' figures kept on both sides and scraped once a
  // second: what collecting metrics costs a room.
  auto pairs = static_cast<int>(a.get("metrics-pairs", a.has("quick") ? 1 : 8));
  auto m = on_against_off("room_latency_metrics_us", "metrics", pairs,
                          [&](bool on) { return room_latency_run(a, std::nullopt, on); });
  {
    // One scrape's cost: collect and render one rank's figures.
    auto reg = std::make_shared<metrics::registry>();
    metrics::rank_figures one{reg, rank_ref{role::decode, "d", 1, 0, 0}};
    one.moved(std::nullopt, kv_poll::success, failure{}, 1ms);
    metrics::watch_process(*reg, {{"process", "bench"}});
    std::vector<double> us;
    for (int i = 0; i < 200; ++i) {
      auto t0 = clock_type::now();
      (void)metrics::render(reg->collect());
      us.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
    }
    m.extra["scrape_us_p50"] = percentile(us, 50);
  }
  m.notes["room"] = room;
  m.notes["metrics"] =
      "both ranks keep their Prometheus figures; the decode side renders them once a second";
  print(m, a.json);

  // The same with and without the guard on the CAF ports (both processes'):
  // what reading every BASP header costs a room.
  auto g = on_against_off("room_latency_caf_port_guard_us", "guard", pairs,
                          [&](bool on) { return room_latency_run(a, std::nullopt, false, on); });
  set_caf_port_guard(true);
  g.notes["room"] = room;
  g.notes["guard"] =
      "actors/process/caf_port_guard: every BASP header read on the CAF ports' connections, "
      "handshake deadline, connection caps";
  print(g, a.json);
  if (a.has("no-tls"))
    return;

  // The same with the control plane over mutual TLS (caf::openssl).
  char dir[] = "/tmp/kvferry-bench-tls-XXXXXX";
  if (!::mkdtemp(dir))
    throw std::runtime_error("cannot make a directory for the TLS certificate");
  auto files = bench_certificate(dir);
  if (!files) {
    std::cerr << "kvferry-bench: room_latency_tls_us skipped: the openssl command could not "
                 "make a certificate\n";
    std::filesystem::remove_all(dir);
    return;
  }
  auto tls = room_latency_run(a, std::string{dir});
  std::filesystem::remove_all(dir);
  figure t;
  t.suite = "tcp";
  t.metric = "room_latency_tls_us";
  t.value = percentile(tls.rooms, 50);
  t.unit = "us";
  t.baseline = percentile(plain.rooms, 50);
  t.baseline_name = "room latency p50 without TLS, same run";
  t.reps = static_cast<int>(tls.rooms.size());
  t.extra["p50"] = percentile(tls.rooms, 50);
  t.extra["p99"] = percentile(tls.rooms, 99);
  if (!tls.rtt.empty())
    t.extra["caf_rtt_tls_p50"] = percentile(tls.rtt, 50);
  t.notes["room"] = room;
  t.notes["tls"] = "mutual TLS on the control plane (caf::openssl, ECDSA P-256), data plane tcp";
  print(t, a.json);
}

}  // namespace

int run_tcp_suite(const args& a) {
  if (!a.has("no-bandwidth"))
    bandwidth(a);
  if (!a.has("no-rooms"))
    room_latency(a);
  return 0;
}

int run_tcp_sink_peer(const args& a) {
  auto pages = static_cast<uint32_t>(a.get("pages", 64));
  apps::host_pool pool{bandwidth_shape(), 16, pages, 0};
  transport::options trusted;
  trusted.trust_every_peer = true;
  auto net = std::move(transport::make_transport("tcp", trusted)).value();
  // The guarded receiver grants every page of the pool to the one sender
  // named on the command line, under fence 1.
  auto guarded = std::move(transport::make_transport("tcp", {})).value();
  transport::grant all;
  all.senders.push_back(a.get("grant-to", std::string{}));
  auto every_page = std::make_shared<std::vector<uint32_t>>(pages);
  std::iota(every_page->begin(), every_page->end(), 0u);
  for (uint32_t b = 0; b < pool.buffers(); ++b) {
    (void)*net->register_region(pool.page(b, 0), pool.item_len() * pages);
    auto id = *guarded->register_region(pool.page(b, 0), pool.item_len() * pages);
    all.buffers.push_back({id, 0, pool.item_len() * pages, pool.item_len(), every_page});
  }
  guarded->open_fence(1, all);
  auto listening = transport::listen_on("127.0.0.1", 0);
  if (!listening.ok())
    throw std::runtime_error(listening.error().to_string());
  auto [lfd, raw_port] = std::move(listening).value();
  std::thread raw{[&, fd = lfd.get()] {
    int c = ::accept(fd, nullptr, nullptr);
    if (c >= 0) {
      raw_sink(c, pool);
      ::close(c);
    }
  }};
  std::cout << "ready " << net->endpoint() << " raw=" << raw_port
            << " guarded=" << guarded->endpoint()
            << " credential=" << guarded->credential_for(all.senders.front()) << std::endl;
  wait_for_parent();
  lfd.shutdown();
  raw.join();
  return 0;
}

int run_prefill_rooms_peer(const args& a) {
  if (a.has("no-caf-port-guard"))
    set_caf_port_guard(false);
  kvferry::config cfg;
  if (auto tls = tls_of(a))
    enable_tls(cfg, *tls);
  caf::actor_system sys{cfg};
  auto boot = sys.spawn(bootstrap, std::string{"bench-prefill"}, fresh_generation());
  auto port = publish_actor(sys, boot, 0, "127.0.0.1");
  if (!port)
    throw std::runtime_error(sys.render(port.error()));
  apps::host_pool pool{apps::model_shape{"tiny", 4, 8, 64, kv_dtype::bf16, false}, 16, 64, 16};
  rank_options o;
  o.side = role::prefill;
  o.instance = "bench-prefill";
  o.pool = pool.describe();
  o.transport = "tcp";
  o.bootstrap = bootstrap_locator{{}, "127.0.0.1", *port};
  if (a.has("metrics"))
    o.metrics = std::make_shared<metrics::registry>();
  auto rt = runtime::start(sys, std::move(o));
  if (!rt)
    throw std::runtime_error(sys.render(rt.error()));
  std::cout << "ready bootstrap=" << *port << std::endl;
  apps::workload w;
  w.rooms = static_cast<uint32_t>(a.get("rooms", 1000));
  w.min_tokens = w.max_tokens = 16;
  w.chunk_pages = 0;
  w.concurrency = 4;
  auto report = apps::drive_prefill(apps::instance_ranks{{rt->get()}, {&pool}}, w);
  wait_for_parent();  // it measures CAF's round trip against our bootstrap next
  (*rt)->stop();
  caf::anon_send_exit(boot, caf::exit_reason::kill);
  return report.ok() ? 0 : 1;
}

}  // namespace kvferry::bench
