#include "apps/bench/suite_transports.hpp"

#include "apps/bench/peer_lines.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>

#include "apps/bench/bench_report.hpp"
#include "apps/bench/kv_traffic.hpp"
#include "apps/common/child_process.hpp"
#include "transport/base/posix_socket.hpp"
#include "transport/registry.hpp"
#include "transport/shared_memory.hpp"
#include "transport/tcp/tcp_options.hpp"

namespace kvferry::bench {

namespace {

using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

const std::vector<uint64_t> sizes = {4 << 10,    16 << 10,   64 << 10,   256 << 10,
                                     1ull << 20, 4ull << 20, 16ull << 20};

std::string size_name(uint64_t s) {
  return s >= (1 << 20) ? std::to_string(s >> 20) + " MiB" : std::to_string(s >> 10) + " KiB";
}

/// Settings of one run of the suite.
struct settings {
  int reps;
  uint32_t pages;
  uint32_t chunk;
  uint64_t kv_bytes;
  uint64_t size_bytes;  ///< bytes per rep of each per-size figure
  uint64_t flat;        ///< the flat region the per-size writes cycle through
  /// Both ends' backend options (tcp_options: streams, socket buffers). The backends
  /// are measured on their own: the receiver trusts the bench's sender
  /// (options::trust_every_peer); suite tcp measures admission's cost.
  transport::options net;
};

settings settings_of(const args& a) {
  bool quick = a.has("quick");
  settings s;
  s.reps = static_cast<int>(a.get("reps", quick ? 3 : 5));
  s.pages = static_cast<uint32_t>(a.get("pages", 32));
  s.chunk = static_cast<uint32_t>(a.get("chunk-pages", 16));
  s.kv_bytes = a.get("bytes", (quick ? 256ull : 1024ull) << 20);
  s.size_bytes = a.get("size-bytes", (quick ? 64ull : 256ull) << 20);
  s.flat = 256ull << 20;
  s.net.trust_every_peer = true;
  auto& tcp = s.net.backend<transport::tcp::tcp_options>();
  tcp.streams = static_cast<uint32_t>(a.get("tcp-streams", tcp.streams));
  tcp.socket_buffer =
      static_cast<int>(a.get("tcp-buffer", static_cast<uint64_t>(tcp.socket_buffer)));
  return s;
}

// -- raw TCP baselines -----------------------------------------------------------
// The bytes of a round cut in `streams` shares, each sent down its own raw
// socket by its own thread, from (and into) its own part of the pool. Per
// round and socket: an 8-byte length, the bytes, a 1-byte ack.

/// Where stream `i` of `streams` starts in the pool, so that shares do not
/// read or write the same memory.
uint32_t first_buffer(const apps::host_pool& pool, uint32_t i, uint32_t streams) {
  return pool.buffers() * i / std::max<uint32_t>(1, streams);
}

/// Moves `bytes` between `fd` and the pool from `buffer` on, in pieces of at
/// most `chunk`: sending (writev) or receiving (readv).
bool raw_move(int fd, const apps::host_pool& pool, uint32_t buffer, uint64_t bytes, uint64_t chunk,
              bool send) {
  uint64_t offset = 0;
  auto region_bytes = pool.item_len() * pool.pages();
  std::vector<iovec> iov;
  while (bytes > 0) {
    auto len = std::min<uint64_t>({bytes, chunk, region_bytes - offset});
    iov.assign(1, iovec{pool.page(buffer, 0) + offset, len});
    if (!(send ? transport::write_all(fd, iov) : transport::read_all(fd, iov)).ok())
      return false;
    bytes -= len;
    offset += len;
    if (offset == region_bytes) {
      offset = 0;
      buffer = (buffer + 1) % pool.buffers();
    }
  }
  return true;
}

/// The sink of raw stream `i` of `streams`: reads rounds until the socket closes.
void raw_stream_sink(int fd, const apps::host_pool& pool, uint32_t i, uint32_t streams) {
  uint64_t want = 0;
  while (transport::read_exact(fd, &want, sizeof(want)).ok()) {
    if (!raw_move(fd, pool, first_buffer(pool, i, streams), want, 1 << 20, false))
      return;
    char ack = 1;
    if (::send(fd, &ack, 1, MSG_NOSIGNAL) != 1)
      return;
  }
}

/// One round of `bytes` over every socket of `fds` at once, in writes of at
/// most `chunk`. GB/s.
double raw_streams_round(const std::vector<transport::socket_fd>& fds, const apps::host_pool& pool,
                         uint64_t bytes, uint64_t chunk) {
  auto n = static_cast<uint32_t>(fds.size());
  std::vector<std::thread> threads;
  std::atomic<bool> ok{true};
  auto t0 = clock_type::now();
  for (uint32_t i = 0; i < n; ++i)
    threads.emplace_back([&, i] {
      uint64_t share = bytes / n + (i == 0 ? bytes % n : 0);
      char ack = 0;
      if (::send(fds[i].get(), &share, sizeof(share), MSG_NOSIGNAL) != sizeof(share) ||
          !raw_move(fds[i].get(), pool, first_buffer(pool, i, n), share, chunk, true) ||
          !transport::read_exact(fds[i].get(), &ack, 1).ok())
        ok = false;
    });
  for (auto& t : threads)
    t.join();
  if (!ok)
    throw std::runtime_error("raw baseline: a stream failed");
  return static_cast<double>(bytes) /
         std::chrono::duration<double>(clock_type::now() - t0).count() / 1e9;
}

/// A sink peer and our transport connected to it, with our own pool and flat
/// region registered the same way (ids 1..n, then n+1).
struct session {
  std::unique_ptr<apps::child_process> sink;
  std::unique_ptr<transport::transport> net;
  transport::peer_id peer = 0;
  transport::region_id flat_id = 0;
  std::optional<transport::socket_fd> raw;
  std::vector<transport::socket_fd> raw_streams;  ///< the multi-stream raw baseline
  round_counter rc;

  session(const std::string& backend, const settings& s, const apps::host_pool& pool,
          const transport::shared_memory& flat) {
    sink = std::make_unique<apps::child_process>(std::vector<std::string>{
        self_exe(), "--peer=transport-sink", "--backend=" + backend,
        "--pages=" + std::to_string(s.pages), "--flat=" + std::to_string(s.flat),
        "--tcp-streams=" + std::to_string(s.net.backend<transport::tcp::tcp_options>().streams),
        "--tcp-buffer=" +
            std::to_string(s.net.backend<transport::tcp::tcp_options>().socket_buffer)});
    auto line = sink->wait_for_line([](auto& l) { return l.rfind("ready ", 0) == 0; }, 60s);
    std::smatch m;
    if (!line || !std::regex_search(*line, m, std::regex{R"(ready (\S+) raw=(\d+))"}))
      throw std::runtime_error(backend + " sink peer did not start: " + sink->output());
    auto made = transport::make_transport(backend, s.net);
    if (!made.ok())
      throw std::runtime_error(made.error().to_string());
    net = std::move(made).value();
    register_pool(*net, pool);
    flat_id = *net->register_region(flat.data(), flat.size());
    net->set_completion_handler(rc.handler());
    peer = *net->connect(m[1]);
    if (auto port = std::stoul(m[2]); port != 0) {
      auto fd = transport::connect_to({"127.0.0.1", static_cast<uint16_t>(port)}, 5000);
      if (!fd.ok())
        throw std::runtime_error("raw baseline: " + fd.error().to_string());
      raw = std::move(fd).value();
      // Then one connection per tcp stream, served by the sink in that order.
      for (uint32_t i = 0; i < s.net.backend<transport::tcp::tcp_options>().streams; ++i) {
        auto more = transport::connect_to({"127.0.0.1", static_cast<uint16_t>(port)}, 5000);
        if (!more.ok())
          throw std::runtime_error("raw baseline: " + more.error().to_string());
        // The sink numbers connections as it accepts them: send ours first.
        uint32_t index = i;
        if (::send(more->get(), &index, sizeof(index), MSG_NOSIGNAL) != sizeof(index))
          throw std::runtime_error("raw baseline: cannot send the stream index");
        raw_streams.push_back(std::move(more).value());
      }
    }
  }

  ~session() {
    // The sink's raw readers end when our raw sockets close.
    raw.reset();
    raw_streams.clear();
    net.reset();
    sink->close_stdin();
    sink->wait(30s);
  }

  /// `bytes` as batches of `per_batch` writes of `size` bytes each, cycling
  /// through the flat regions, `window` batches in flight. Write i of the
  /// round goes to batch i mod batches (as the peers' script does): no two
  /// writes of a batch are adjacent. GB/s.
  double flat_round(uint64_t size, uint64_t bytes, uint64_t flat_bytes, uint32_t window,
                    uint64_t per_batch = 1) {
    auto writes = std::max<uint64_t>(1, bytes / size);
    auto batches = std::max<uint64_t>(1, writes / per_batch);
    writes = batches * per_batch;
    auto span = flat_bytes / size * size;
    std::vector<transport::write_batch> plan(batches);
    for (uint64_t i = 0; i < writes; ++i) {
      auto off = (i * size) % span;
      plan[i % batches].ops.push_back({flat_id, off, flat_id, off, size});
    }
    {
      std::lock_guard g{rc.mu};
      rc.done = 0;
    }
    auto t0 = clock_type::now();
    for (uint64_t b = 0; b < batches; ++b) {
      {
        std::unique_lock g{rc.mu};
        rc.cv.wait(g, [&] { return b - rc.done < window; });
      }
      plan[b].cookie = b;
      auto st = net->post(peer, std::move(plan[b]));
      if (!st.ok())
        throw std::runtime_error(st.to_string());
    }
    std::unique_lock g{rc.mu};
    rc.cv.wait(g, [&] { return rc.done == batches; });
    if (rc.failed > 0)
      throw std::runtime_error("flat round failed: " + rc.first_error);
    return static_cast<double>(writes * size) /
           std::chrono::duration<double>(clock_type::now() - t0).count() / 1e9;
  }
};

/// `bytes` as memcpy of `size` bytes, cycling through the flat regions. GB/s.
double memcpy_flat(const transport::shared_memory& src, const transport::shared_memory& dst,
                   uint64_t size, uint64_t bytes) {
  auto n = std::max<uint64_t>(1, bytes / size);
  auto span = src.size() / size * size;
  auto t0 = clock_type::now();
  for (uint64_t i = 0; i < n; ++i) {
    auto off = (i * size) % span;
    std::memcpy(dst.data() + off, src.data() + off, size);
  }
  return static_cast<double>(n * size) /
         std::chrono::duration<double>(clock_type::now() - t0).count() / 1e9;
}

std::optional<std::string> find_in_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs{path ? path : "/usr/bin:/bin"};
  std::string dir;
  while (std::getline(dirs, dir, ':'))
    if (!dir.empty() && ::access((dir + "/" + name).c_str(), X_OK) == 0)
      return dir + "/" + name;
  return std::nullopt;
}

/// ucx_perftest's ucp_put_bw over UCX_TLS=`tls` at `size`, GB/s; nullopt if it
/// did not run.
std::optional<double> ucx_put_bw(const std::string& exe, const std::string& tls, uint64_t size,
                                 uint64_t bytes, uint16_t port) {
  auto iters = std::clamp<uint64_t>(bytes / size, 50, 20000);
  std::vector<std::string> env{"/usr/bin/env", "UCX_TLS=" + tls, "UCX_NET_DEVICES=lo",
                               "UCX_WARN_UNUSED_ENV_VARS=n"};
  auto server_argv = env;
  for (auto s : {exe, std::string{"-p"}, std::to_string(port)})
    server_argv.push_back(s);
  apps::child_process server{server_argv};
  std::this_thread::sleep_for(300ms);  // the server listens before the client connects
  auto client_argv = env;
  for (auto s :
       {exe, std::string{"127.0.0.1"}, std::string{"-p"}, std::to_string(port), std::string{"-t"},
        std::string{"ucp_put_bw"}, std::string{"-s"}, std::to_string(size), std::string{"-n"},
        std::to_string(iters), std::string{"-w"}, std::string{"100"}})
    client_argv.push_back(s);
  apps::child_process client{client_argv};
  client.wait(120s);
  server.wait(10s);
  std::smatch m;
  // Final: iters p50 avg overall bw-avg bw-overall(MB/s, i.e. MiB/s) rate-avg rate-overall
  std::regex final_line{R"(Final:\s+\d+\s+\S+\s+\S+\s+\S+\s+\S+\s+(\S+))"};
  auto out = client.output();
  if (!std::regex_search(out, m, final_line))
    return std::nullopt;
  return std::stod(m[1]) * 1.048576 / 1000.0;
}

figure make_figure(const std::string& metric, const std::vector<double>& values,
                   const std::vector<double>& base, const std::string& baseline_name) {
  figure f;
  f.suite = "transports";
  f.metric = metric;
  f.value = median(values);
  f.unit = "GB/s";
  if (!base.empty()) {
    f.baseline = median(base);
    f.baseline_name = baseline_name;
  }
  f.reps = static_cast<int>(values.size());
  f.extra["min"] = *std::min_element(values.begin(), values.end());
  f.extra["max"] = *std::max_element(values.begin(), values.end());
  return f;
}

/// Per size: GB/s of each column ("shm", "memcpy", "tcp", "raw_tcp", "ucx_tcp", "ucx_posix",
/// "raw_tcp_streams").
using size_table = std::map<uint64_t, std::map<std::string, double>>;

void kv_figure(const std::string& backend, const settings& s, const args& a,
               const apps::host_pool& pool, const transport::shared_memory& flat,
               size_table& table) {
  session ses{backend, s, pool, flat};
  auto layout = registered_layout(pool);
  std::mt19937 rng{42};
  uint64_t writes = 0;
  std::unique_ptr<apps::host_pool> copy_dst;
  if (backend == "shm")
    copy_dst = std::make_unique<apps::host_pool>(bandwidth_shape(), 16, s.pages, 0);
  auto baseline = [&](uint64_t bytes) {
    return backend == "shm" ? memcpy_round(pool, *copy_dst, layout, layout, bytes, s.chunk, rng)
                            : raw_round(ses.raw->get(), pool, bytes);
  };
  bool tcp = backend == "tcp";
  auto streams = static_cast<uint32_t>(ses.raw_streams.size());
  // One unmeasured round each, then alternate so all see the same machine.
  transport_round(*ses.net, ses.peer, layout, layout, s.kv_bytes / 4, s.chunk, 2, rng, ses.rc,
                  writes);
  baseline(s.kv_bytes / 4);
  if (tcp)
    raw_streams_round(ses.raw_streams, pool, s.kv_bytes / 4, 1 << 20);
  writes = 0;
  std::vector<double> kv, base, multi;
  for (int r = 0; r < s.reps; ++r) {
    kv.push_back(transport_round(*ses.net, ses.peer, layout, layout, s.kv_bytes, s.chunk, 2, rng,
                                 ses.rc, writes));
    base.push_back(baseline(s.kv_bytes));
    if (tcp)
      multi.push_back(raw_streams_round(ses.raw_streams, pool, s.kv_bytes, 1 << 20));
  }
  // tcp: the baseline is the better of one raw stream and as many raw
  // streams as the backend opens (the same bytes either way); both are kept.
  bool multi_wins = tcp && median(multi) > median(base);
  auto f = make_figure(backend + "_kv_bandwidth", kv, multi_wins ? multi : base,
                       backend == "shm" ? "memcpy of the same ops, one thread, same run"
                       : !multi_wins
                           ? "raw TCP stream of the same bytes, same processes (1 stream; "
                             "beat " +
                                 std::to_string(streams) + " raw streams)"
                           : "raw TCP streams of the same bytes, same processes (" +
                                 std::to_string(streams) + " streams, as the backend; beat 1)");
  if (tcp) {
    f.extra["raw_1_stream_gbps"] = median(base);
    f.extra["raw_streams_gbps"] = median(multi);
    f.extra["raw_streams"] = streams;
    f.extra["tcp_streams"] = s.net.backend<transport::tcp::tcp_options>().streams;
    f.extra["tcp_socket_buffer"] = s.net.backend<transport::tcp::tcp_options>().socket_buffer;
    f.extra["ratio_vs_1_stream"] = median(kv) / median(base);
    f.extra["ratio_vs_streams"] = median(kv) / median(multi);
  }
  f.extra["bytes_per_rep"] = static_cast<double>(s.kv_bytes);
  f.extra["writes_per_batch"] =
      static_cast<double>(writes) / s.reps /
      std::max<uint64_t>(1, s.kv_bytes / (uint64_t{s.chunk} * pool.page_bytes()));
  f.notes["shape"] = bandwidth_shape().name + ", page 16 (128 KiB per page and buffer, " +
                     std::to_string(pool.buffers()) + " buffers), " + std::to_string(s.chunk) +
                     " random pages per batch into random pages, 2 batches in flight";
  print(f, a.json);

  // Per write size: one write per batch, 8 batches in flight.
  std::unique_ptr<transport::shared_memory> flat_dst;
  if (backend == "shm")
    flat_dst = std::make_unique<transport::shared_memory>(
        std::move(transport::shared_memory::allocate(s.flat)).value());
  for (auto size : sizes) {
    auto bytes = std::min<uint64_t>(s.size_bytes, size * 20000);
    std::vector<double> v, b, m;
    ses.flat_round(size, bytes / 4, s.flat, 8);
    for (int r = 0; r < s.reps; ++r) {
      v.push_back(ses.flat_round(size, bytes, s.flat, 8));
      b.push_back(backend == "shm" ? memcpy_flat(flat, *flat_dst, size, bytes)
                                   : raw_round(ses.raw->get(), pool, bytes, size));
      if (tcp)
        m.push_back(raw_streams_round(ses.raw_streams, pool, bytes, size));
    }
    auto g = make_figure(backend + "_bandwidth_by_size", v, b,
                         backend == "shm" ? "memcpy of the same sizes, one thread"
                                          : "raw TCP stream in writes of the same size");
    g.extra["size_bytes"] = static_cast<double>(size);
    g.notes["size"] = size_name(size);
    if (tcp) {
      g.extra["raw_streams_gbps"] = median(m);
      g.extra["raw_streams"] = streams;
      table[size]["raw_tcp_streams"] = median(m);
    }
    print(g, a.json);
    table[size][backend] = g.value;
    table[size][backend == "shm" ? "memcpy" : "raw_tcp"] = *g.baseline;

    // The same writes as the peers post them (peer_transfer.py): about 4 MiB
    // of them per batch, 2 batches in flight.
    auto per_batch = std::max<uint64_t>(1, (4ull << 20) / size);
    std::vector<double> w;
    ses.flat_round(size, bytes / 4, s.flat, 2, per_batch);
    for (int r = 0; r < s.reps; ++r)
      w.push_back(ses.flat_round(size, bytes, s.flat, 2, per_batch));
    auto batched = make_figure(backend + "_bandwidth_by_size_batched", w, b,
                               backend == "shm" ? "memcpy of the same sizes, one thread"
                                                : "raw TCP stream in writes of the same size");
    batched.extra["size_bytes"] = static_cast<double>(size);
    batched.extra["writes_per_batch"] = static_cast<double>(per_batch);
    batched.notes["size"] = size_name(size);
    batched.notes["how"] =
        "writes of this size about 4 MiB to a batch, 2 batches in flight, as the peers post them";
    print(batched, a.json);
    table[size][backend + "_batched"] = batched.value;
  }
}

void ucx_figures(const settings& s, const args& a, size_table& table) {
  auto exe = find_in_path("ucx_perftest");
  if (!exe) {
    figure f;
    f.suite = "transports";
    f.metric = "ucx_put_bw";
    f.unit = "GB/s";
    f.notes["skipped"] = "ucx_perftest not found (Debian package ucx-utils)";
    print(f, a.json);
    return;
  }
  uint16_t port = static_cast<uint16_t>(14100 + ::getpid() % 500);
  for (std::string tls : {"tcp", "posix"})
    for (auto size : sizes) {
      auto bytes = std::min<uint64_t>(s.size_bytes, size * 20000);
      auto gb = ucx_put_bw(*exe, tls, size, bytes, port++);
      figure f;
      f.suite = "transports";
      f.metric = "ucx_put_bw_" + tls;
      f.unit = "GB/s";
      f.reps = 1;
      f.extra["size_bytes"] = static_cast<double>(size);
      f.notes["size"] = size_name(size);
      f.notes["command"] = "UCX_TLS=" + tls + " ucx_perftest -t ucp_put_bw -s " +
                           std::to_string(size) + " (puts into one buffer: cache-hot)";
      if (gb) {
        f.value = *gb;
        table[size]["ucx_" + tls] = *gb;
      } else {
        f.notes["skipped"] = "ucx_perftest printed no Final line";
      }
      print(f, a.json);
    }
}

// -- peers: Mooncake's transfer engine and NIXL, from a venv (make peers) -----

/// The interpreter of the peers' venv: --peers-python, $KVFERRY_PEERS_PYTHON,
/// or the venv `make peers` makes in the build directory.
std::string peers_python(const args& a) {
  if (a.has("peers-python"))
    return a.get("peers-python", std::string{});
  if (const char* env = std::getenv("KVFERRY_PEERS_PYTHON"); env && *env)
    return env;
  return std::string{KVFERRY_PEERS_VENV} + "/bin/python";
}

figure skipped_peer(const std::string& engine, const std::string& why) {
  figure f;
  f.suite = "transports";
  f.metric = engine + "_bandwidth_by_size";
  f.unit = "GB/s";
  f.notes["skipped"] = why;
  return f;
}

/// Mooncake's transfer engine (tcp) and NIXL (UCX over tcp), each through
/// apps/bench/peer_transfer.py in the peers' venv, on the same sizes and the
/// same KV batch, in this run: their lines as they print them, and their
/// per-size figures into the table. Skipped, saying why, where not installed.
/// False if a peer that is installed failed its run.
bool peer_figures(const settings& s, const args& a, size_table& table) {
  bool ok = true;
  auto python = peers_python(a);
  const std::string script = KVFERRY_PEER_SCRIPT;
  for (std::string engine : {"mooncake_tcp", "nixl_ucx"}) {
    if (::access(python.c_str(), X_OK) != 0) {
      print(skipped_peer(engine, "no peers venv (" + python +
                                     " not found): `make peers` installs Mooncake's transfer "
                                     "engine and NIXL into one"),
            a.json);
      continue;
    }
    auto name = engine.substr(0, engine.find('_'));
    apps::child_process peer{
        {python, script, "--engine=" + name, "--size-bytes=" + std::to_string(s.size_bytes),
         "--kv-bytes=" + std::to_string(s.kv_bytes), "--reps=" + std::to_string(s.reps)}};
    int rc = peer.wait(std::chrono::minutes{15});
    bool any = false;
    std::stringstream lines{peer.output()};
    std::string line;
    while (std::getline(lines, line)) {
      if (line.rfind("{\"suite\": \"transports\"", 0) != 0)
        continue;  // the libraries' own log lines
      any = true;
      auto metric = json_text(line, "metric").value_or("");
      auto value = json_number(line, "value");
      auto size = json_number(line, "size_bytes");
      bool skipped = line.find("\"skipped\"") != std::string::npos;
      if (!skipped && value && size && metric == engine + "_bandwidth_by_size")
        table[static_cast<uint64_t>(*size)][engine] = *value;
      if (a.json) {
        std::cout << line << "\n";
        continue;
      }
      figure f;
      f.suite = "transports";
      f.metric = metric;
      f.value = value.value_or(0);
      f.unit = "GB/s";
      f.reps = static_cast<int>(json_number(line, "reps").value_or(0));
      if (size)
        f.extra["size_bytes"] = *size;
      if (auto why = json_text(line, "skipped"))
        f.notes["skipped"] = *why;
      print(f, false);
    }
    if (!any)
      print(skipped_peer(engine, python + " " + script + " printed no figure (exit status " +
                                     std::to_string(rc) + ")"),
            a.json);
    ok = ok && rc == 0;
  }
  std::cout.flush();
  return ok;
}

void write_table(const std::string& path, const size_table& table) {
  std::ofstream out{path};
  out << "# size_bytes shm memcpy tcp raw_tcp ucx_tcp ucx_posix raw_tcp_streams mooncake_tcp "
         "nixl_ucx shm_batched tcp_batched (GB/s; NaN: not measured)\n";
  for (auto& [size, row] : table) {
    out << size;
    for (auto col : {"shm", "memcpy", "tcp", "raw_tcp", "ucx_tcp", "ucx_posix", "raw_tcp_streams",
                     "mooncake_tcp", "nixl_ucx", "shm_batched", "tcp_batched"}) {
      auto i = row.find(col);
      out << " " << (i == row.end() ? std::string{"NaN"} : std::to_string(i->second));
    }
    out << "\n";
  }
}

}  // namespace

int run_transports_suite(const args& a) {
  auto s = settings_of(a);
  apps::host_pool pool{bandwidth_shape(), 16, s.pages, 0};
  for (uint32_t b = 0; b < pool.buffers(); ++b)
    for (uint32_t p = 0; p < s.pages; ++p)
      std::memset(pool.page(b, p), static_cast<int>(b * 7 + p), pool.item_len());
  auto flat = std::move(transport::shared_memory::allocate(s.flat)).value();
  std::memset(flat.data(), 0x5a, flat.size());
  size_table table;
  auto only = a.get("backends", std::string{"shm,tcp"});
  for (std::string backend : {"shm", "tcp"})
    if (only.find(backend) != std::string::npos)
      kv_figure(backend, s, a, pool, flat, table);
  if (!a.has("no-ucx"))
    ucx_figures(s, a, table);
  bool peers_ok = a.has("no-peers") || peer_figures(s, a, table);
  if (a.has("table"))
    write_table(a.get("table", std::string{}), table);
  return peers_ok ? 0 : 1;
}

int run_transport_sink_peer(const args& a) {
  auto backend = a.get("backend", std::string{"shm"});
  auto pages = static_cast<uint32_t>(a.get("pages", 32));
  apps::host_pool pool{bandwidth_shape(), 16, pages, 0};
  auto flat = transport::shared_memory::allocate(a.get("flat", 256ull << 20));
  if (!flat.ok())
    throw std::runtime_error(flat.error().to_string());
  transport::options opts;
  opts.trust_every_peer = true;  // the bench's own sender (see bench_setup::net)
  auto& tcp = opts.backend<transport::tcp::tcp_options>();
  tcp.streams = static_cast<uint32_t>(a.get("tcp-streams", tcp.streams));
  tcp.socket_buffer =
      static_cast<int>(a.get("tcp-buffer", static_cast<uint64_t>(tcp.socket_buffer)));
  auto made = transport::make_transport(backend, opts);
  if (!made.ok())
    throw std::runtime_error(made.error().to_string());
  auto net = std::move(made).value();
  register_pool(*net, pool);
  (void)*net->register_region(flat->data(), flat->size());
  std::optional<transport::socket_fd> listener;
  uint16_t raw_port = 0;
  std::thread raw;
  std::vector<std::thread> raw_streams;
  if (backend == "tcp") {
    auto listening = transport::listen_on("127.0.0.1", 0);
    if (!listening.ok())
      throw std::runtime_error(listening.error().to_string());
    auto [lfd, port] = std::move(listening).value();
    listener = std::move(lfd);
    raw_port = port;
    // The first connection is the single raw stream; the next ones (each
    // sends its index first) are the multi-stream baseline's.
    raw = std::thread{[&pool, &raw_streams, streams = tcp.streams, fd = listener->get()] {
      int c = ::accept(fd, nullptr, nullptr);
      if (c < 0)
        return;
      for (uint32_t i = 0; i < streams; ++i) {
        int s = ::accept(fd, nullptr, nullptr);
        uint32_t index = 0;
        if (s < 0)
          break;
        if (!transport::read_exact(s, &index, sizeof(index)).ok() || index >= streams) {
          ::close(s);
          break;
        }
        raw_streams.emplace_back([&pool, s, index, streams] {
          raw_stream_sink(s, pool, index, streams);
          ::close(s);
        });
      }
      raw_sink(c, pool);
      ::close(c);
    }};
  }
  std::cout << "ready " << net->endpoint() << " raw=" << raw_port << std::endl;
  wait_for_parent();
  if (listener)
    listener->shutdown();
  if (raw.joinable())
    raw.join();
  for (auto& t : raw_streams)
    t.join();
  return 0;
}

}  // namespace kvferry::bench
