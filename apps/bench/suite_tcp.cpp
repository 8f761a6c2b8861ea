#include "apps/bench/suite_tcp.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <iostream>
#include <mutex>
#include <numeric>
#include <random>
#include <regex>
#include <thread>

#include <caf/actor_system.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>

#include "actors/bootstrap/bootstrap_actor.hpp"
#include "actors/config.hpp"
#include "actors/facade/runtime.hpp"
#include "actors/plan/planner.hpp"
#include "apps/bench/bench_report.hpp"
#include "apps/common/child_process.hpp"
#include "apps/common/host_pool.hpp"
#include "apps/common/scheduler_driver.hpp"
#include "transport/registry.hpp"
#include "transport/tcp/tcp_socket.hpp"

namespace kvferry::bench {

namespace {

using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr size_t raw_chunk = 1 << 20;

/// The KV shape both processes use for bandwidth: a 7B model's pages.
apps::model_shape bandwidth_shape() {
  return apps::llama_7b();
}

/// The layout of a host_pool whose buffers were registered in order (ids 1..n).
kv_layout registered_layout(const apps::host_pool& pool) {
  std::vector<uint32_t> ids(pool.buffers());
  std::iota(ids.begin(), ids.end(), 1u);
  return *layout_of(pool.describe(), ids);
}

std::string self_exe() {
  char buf[4096];
  auto n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0)
    throw std::runtime_error("cannot find my own executable");
  return std::string(buf, static_cast<size_t>(n));
}

/// Blocks until the parent closes our stdin.
void wait_for_parent() {
  char c;
  while (::read(0, &c, 1) > 0)
    ;
}

/// Reads the baseline stream: per round, an 8-byte length, that many bytes
/// into the pool's memory (cycling through its buffers), then a 1-byte ack.
void raw_sink(int fd, const apps::host_pool& pool) {
  uint64_t want = 0;
  size_t buffer = 0, offset = 0;
  auto region_bytes = pool.item_len() * pool.pages();
  while (transport::tcp::read_exact(fd, &want, sizeof(want)).ok()) {
    while (want > 0) {
      auto len = std::min<uint64_t>({want, raw_chunk, region_bytes - offset});
      if (!transport::tcp::read_exact(fd, pool.page(buffer, 0) + offset, len).ok())
        return;
      want -= len;
      offset += len;
      if (offset == region_bytes) {
        offset = 0;
        buffer = (buffer + 1) % pool.buffers();
      }
    }
    char ack = 1;
    if (::send(fd, &ack, 1, MSG_NOSIGNAL) != 1)
      return;
  }
}

/// One baseline round: `bytes` from the source pool's memory down a raw socket.
double raw_round(int fd, const apps::host_pool& pool, uint64_t bytes) {
  auto t0 = clock_type::now();
  if (::send(fd, &bytes, sizeof(bytes), MSG_NOSIGNAL) != sizeof(bytes))
    throw std::runtime_error("raw baseline: send failed");
  size_t buffer = 0, offset = 0;
  auto region_bytes = pool.item_len() * pool.pages();
  uint64_t left = bytes;
  while (left > 0) {
    auto len = std::min<uint64_t>({left, raw_chunk, region_bytes - offset});
    std::vector<iovec> iov{{pool.page(buffer, 0) + offset, len}};
    if (!transport::tcp::write_all(fd, iov).ok())
      throw std::runtime_error("raw baseline: write failed");
    left -= len;
    offset += len;
    if (offset == region_bytes) {
      offset = 0;
      buffer = (buffer + 1) % pool.buffers();
    }
  }
  char ack;
  if (!transport::tcp::read_exact(fd, &ack, 1).ok())
    throw std::runtime_error("raw baseline: no ack");
  return static_cast<double>(bytes) /
         std::chrono::duration<double>(clock_type::now() - t0).count() / 1e9;
}

/// Counts completions of the current round.
struct round_counter {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t done = 0;
  uint64_t failed = 0;
  std::string first_error;
};

/// One transport round: `bytes` as KV-shaped batches of `chunk` pages with
/// random page orders on both sides, `window` batches in flight.
double transport_round(transport::transport& net, transport::peer_id peer, const kv_layout& src,
                       const kv_layout& dst, uint64_t bytes, uint32_t chunk, uint32_t window,
                       std::mt19937& rng, round_counter& rc, uint64_t& writes) {
  std::vector<uint32_t> sp(src.page_capacity()), dp(dst.page_capacity());
  std::iota(sp.begin(), sp.end(), 0u);
  std::iota(dp.begin(), dp.end(), 0u);
  auto per_batch = uint64_t{chunk} * src.kv_buffers.size() * src.kv_buffers[0].item_len;
  auto batches = std::max<uint64_t>(1, bytes / per_batch);
  {
    std::lock_guard g{rc.mu};
    rc.done = 0;
  }
  auto t0 = clock_type::now();
  for (uint64_t b = 0; b < batches; ++b) {
    std::shuffle(sp.begin(), sp.end(), rng);
    std::shuffle(dp.begin(), dp.end(), rng);
    auto plan = plan_kv(src, dst, std::span{sp.data(), chunk}, std::span{dp.data(), chunk});
    if (!plan.ok())
      throw std::runtime_error(plan.error().to_string());
    writes += plan->ops.size();
    {
      std::unique_lock g{rc.mu};
      rc.cv.wait(g, [&] { return b - rc.done < window; });
    }
    if (auto st = net.post(peer, transport::write_batch{b, std::move(plan->ops)}); !st.ok())
      throw std::runtime_error(st.to_string());
  }
  std::unique_lock g{rc.mu};
  rc.cv.wait(g, [&] { return rc.done == batches; });
  auto secs = std::chrono::duration<double>(clock_type::now() - t0).count();
  if (rc.failed > 0)
    throw std::runtime_error("transport round failed: " + rc.first_error);
  return static_cast<double>(batches * per_batch) / secs / 1e9;
}

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

  apps::child_process sink{{self_exe(), "--peer=tcp-sink", "--pages=" + std::to_string(pages)}};
  auto line = sink.wait_for_line([](auto& l) { return l.rfind("ready ", 0) == 0; }, 60s);
  std::smatch m;
  if (!line || !std::regex_search(*line, m, std::regex{R"(ready (\S+) raw=(\d+))"}))
    throw std::runtime_error("tcp-sink peer did not start: " + sink.output());
  std::string endpoint = m[1];
  auto raw_port = static_cast<uint16_t>(std::stoul(m[2]));

  auto made = transport::make_transport("tcp", {});
  auto net = std::move(made).value();
  for (uint32_t b = 0; b < pool.buffers(); ++b)
    (void)*net->register_region(pool.page(b, 0), pool.item_len() * pages);
  round_counter rc;
  net->set_completion_handler([&rc](transport::completion c) {
    std::lock_guard g{rc.mu};
    ++rc.done;
    if (!c.result.ok() && rc.failed++ == 0)
      rc.first_error = c.result.to_string();
    rc.cv.notify_all();
  });
  auto peer = *net->connect(endpoint);
  auto layout = registered_layout(pool);
  auto raw = transport::tcp::connect_to({"127.0.0.1", raw_port}, 5000);
  if (!raw.ok())
    throw std::runtime_error("raw baseline: " + raw.error().to_string());

  std::mt19937 rng{42};
  uint64_t writes = 0;
  // One unmeasured round each, then alternate so both see the same machine.
  transport_round(*net, peer, layout, layout, bytes / 4, chunk, 2, rng, rc, writes);
  raw_round(raw->get(), pool, bytes / 4);
  writes = 0;
  std::vector<double> kv, base;
  for (int r = 0; r < reps; ++r) {
    kv.push_back(transport_round(*net, peer, layout, layout, bytes, chunk, 2, rng, rc, writes));
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
  sink.close_stdin();
  sink.wait(10s);
}

void room_latency(const args& a) {
  auto samples = static_cast<uint32_t>(a.get("rooms", a.has("quick") ? 200 : 1000));
  auto warmup = 50u;
  apps::child_process peer{
      {self_exe(), "--peer=prefill-rooms", "--rooms=" + std::to_string(samples + warmup)}};
  auto line = peer.wait_for_line([](auto& l) { return l.rfind("ready ", 0) == 0; }, 60s);
  std::smatch m;
  if (!line || !std::regex_search(*line, m, std::regex{R"(bootstrap=(\d+))"}))
    throw std::runtime_error("prefill-rooms peer did not start: " + peer.output());
  auto port = static_cast<uint16_t>(std::stoul(m[1]));

  kvferry::config cfg;
  caf::actor_system sys{cfg};
  apps::workload w = apps::workload{};
  w.rooms = samples + warmup;
  w.min_tokens = w.max_tokens = 16;
  apps::host_pool pool{apps::model_shape{"tiny", 4, 8, 64, kv_dtype::bf16, false}, 16, 16, 4};
  rank_options o;
  o.side = role::decode;
  o.instance = "bench-decode";
  o.pool = pool.describe();
  auto rt = runtime::start(sys, std::move(o));
  if (!rt)
    throw std::runtime_error(sys.render(rt.error()));
  bootstrap_locator where{{}, "127.0.0.1", port};

  std::vector<double> lat;
  for (uint32_t i = 0; i < w.rooms; ++i) {
    auto t0 = clock_type::now();
    auto r = (*rt)->make_receiver(w.room_id(i), where);
    r.init({i % 16}, i % 4);
    kv_poll s;
    while (!is_terminal(s = r.poll()))
      std::this_thread::yield();
    auto us = std::chrono::duration<double, std::micro>(clock_type::now() - t0).count();
    if (s != kv_poll::success)
      throw std::runtime_error("room " + std::to_string(w.room_id(i)) +
                               " failed: " + r.failure()->what());
    if (i >= warmup)
      lat.push_back(us);
  }

  // Baseline: CAF's request/response round trip between the same processes.
  auto boot = sys.middleman().remote_actor<bootstrap_actor>("127.0.0.1", port);
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
  figure f;
  f.suite = "tcp";
  f.metric = "room_latency_us";
  f.value = percentile(lat, 50);
  f.unit = "us";
  if (!rtt.empty()) {
    f.baseline = percentile(rtt, 50);
    f.baseline_name = "CAF request/response round trip p50, same processes";
  }
  f.reps = static_cast<int>(lat.size());
  f.extra["p50"] = percentile(lat, 50);
  f.extra["p99"] = percentile(lat, 99);
  f.notes["room"] = "1 page of 16 tokens, 4 layers x 8 heads x 64 (128 KiB) + 64 B aux";
  print(f, a.json);
  (*rt)->stop();
  peer.close_stdin();
  if (peer.wait(30s) != 0)
    throw std::runtime_error("prefill-rooms peer failed: " + peer.output());
}

}  // namespace

int run_tcp_suite(const args& a) {
  bandwidth(a);
  room_latency(a);
  return 0;
}

int run_tcp_sink_peer(const args& a) {
  auto pages = static_cast<uint32_t>(a.get("pages", 64));
  apps::host_pool pool{bandwidth_shape(), 16, pages, 0};
  auto net = std::move(transport::make_transport("tcp", {})).value();
  for (uint32_t b = 0; b < pool.buffers(); ++b)
    (void)*net->register_region(pool.page(b, 0), pool.item_len() * pages);
  auto listening = transport::tcp::listen_on("127.0.0.1", 0);
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
  std::cout << "ready " << net->endpoint() << " raw=" << raw_port << std::endl;
  wait_for_parent();
  lfd.shutdown();
  raw.join();
  return 0;
}

int run_prefill_rooms_peer(const args& a) {
  kvferry::config cfg;
  caf::actor_system sys{cfg};
  auto boot = sys.spawn(bootstrap, std::string{"bench-prefill"}, fresh_generation());
  auto port = sys.middleman().publish(boot, 0, "127.0.0.1", true);
  if (!port)
    throw std::runtime_error(sys.render(port.error()));
  apps::host_pool pool{apps::model_shape{"tiny", 4, 8, 64, kv_dtype::bf16, false}, 16, 64, 16};
  rank_options o;
  o.side = role::prefill;
  o.instance = "bench-prefill";
  o.pool = pool.describe();
  o.bootstrap = bootstrap_locator{{}, "127.0.0.1", *port};
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
