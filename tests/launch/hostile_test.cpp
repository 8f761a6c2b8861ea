// Hostile peers against a serving cluster (issue 13), with real processes:
// kvferry-launch --local runs 1P1D on the tcp data plane with a verified
// workload (80 rooms/s), and while it runs this process attacks it:
//  (a) foreign writes: a stranger connects to the decode rank's data port,
//      says hello with any name, answers the challenge with garbage (and, on
//      a second connection, not at all), then sends batches with fence 0 at
//      guessed regions and offsets: it is refused and nothing is acknowledged;
//  (b) memory exhaustion: 20 connections send a hello and stall, 20 send a
//      hello, a garbage answer and a batch header announcing 2^22 ops and
//      stall: the decode process's RSS stays bounded and the stalled
//      connections are closed by the receiver;
//  (c) garbage of several shapes (random bytes, huge length fields, a
//      truncated frame, plain HTTP) on every port the decode and prefill node
//      processes listen on (data ports, the metrics HTTP port and the CAF
//      ports: bootstrap, status, decider, published ranks): the connection is
//      dropped, and the listener still accepts afterwards;
//  (d) forged control messages: a CAF client with no credentials asks the
//      decode node's status actor for the rank handles, polls a rank's room
//      (refused) and sends it success verdicts for guessed keys (dropped);
//  (e) BASP bombs on every CAF port of both nodes (issue 29): a 32-byte
//      header declaring 1-4 GiB (client_handshake, direct_message,
//      server_handshake, heartbeat) and 1 KiB, held open; a drip of a byte
//      every 100 ms; 1,000 connections at once. Each is closed (the
//      handshake's deadline, the caps), and neither node's RSS moves by 64 MiB.
// Throughout, the workload must finish by itself: every room Success, verified
// byte for byte, 0 corrupted, 0 disagreements, the launcher exits 0.
//
// The attacks run in a thread of their own (the launcher's pipe is read by
// the test's main thread meanwhile); they record what they saw and the main
// thread asserts it. Every read has a timeout.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <netinet/in.h>
#include <netinet/tcp.h>

#include <dirent.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>

#include <catch2/catch.hpp>

#include "actors/process/config.hpp"
#include "apps/common/child_process.hpp"
#include "messages/node_status.hpp"
#include "messages/room.hpp"
#include "messages/scheduler.hpp"
#include "messages/type_ids.hpp"
#include "tests/launch/basp_bombs.hpp"
#include "tests/support/free_port.hpp"
#include "tests/support/process_probe.hpp"
#include "tests/support/raw_tcp.hpp"
#include "tests/support/workload_report.hpp"
#include "transport/base/peer_auth.hpp"
#include "transport/tcp/tcp_wire.hpp"

using namespace kvferry::apps;
using kvferry::test::check_every_room;
using kvferry::test::dial;
using kvferry::test::ending;
using kvferry::test::free_port;
using kvferry::test::listening_ports;
using kvferry::test::pids_with;
using kvferry::test::recv_bytes;
using kvferry::test::rss_kib;
using kvferry::test::send_bytes;
using kvferry::test::wait_closed;
using namespace std::chrono_literals;
namespace wire = kvferry::transport::tcp;

namespace {

const std::string launcher = KVFERRY_LAUNCH_PATH;

using steady = std::chrono::steady_clock;

/// A tcp hello naming `name`.
std::string hello_bytes(const std::string& name) {
  wire::hello h;
  h.name_len = static_cast<uint32_t>(name.size());
  std::string out(reinterpret_cast<const char*>(&h), sizeof(h));
  return out + name;
}

/// A batch of one op with fence 0 (or `fence`) writing `len` bytes at
/// region/offset, payload included.
std::string batch_bytes(uint32_t region, uint64_t offset, uint64_t len, uint64_t cookie,
                        uint64_t fence = 0) {
  wire::batch_header bh;
  bh.n_ops = 1;
  bh.cookie = cookie;
  bh.payload_bytes = len;
  bh.fence = fence;
  wire::op_header op;
  op.region = region;
  op.offset = offset;
  op.length = len;
  std::string out(reinterpret_cast<const char*>(&bh), sizeof(bh));
  out.append(reinterpret_cast<const char*>(&op), sizeof(op));
  out.append(len, '\x5a');
  return out;
}

/// What the attacks saw; asserted by the main thread.
struct findings {
  std::string error;  ///< set when an attack could not be mounted at all

  // Targets.
  int decode_pid = 0, prefill_pid = 0;
  uint16_t data_port = 0;
  std::set<uint16_t> decode_ports, prefill_ports;

  // (a)
  bool challenged = false;  ///< a challenge came, requiring an answer
  bool refused = false;     ///< the auth result said refused
  bool closed_after_refusal = false;
  bool silent_closed = false;  ///< the connection that sent batches instead of an answer
  uint32_t batches_sent = 0;
  uint32_t acks_ok = 0;  ///< acks with code 0 (must stay 0)
  uint32_t acks_any = 0;

  // (b)
  long rss_before = 0, rss_peak = 0, rss_after = 0;
  int stall_opened = 0, stall_closed = 0;

  // (c)
  struct probe {
    uint16_t port;
    std::string owner;
    std::string shape;
    bool dropped;
  };
  std::vector<probe> probes;
  std::map<uint16_t, bool> accepts_after;
  std::map<uint16_t, bool> data_port_still_challenges;

  // (e)
  kvferry::test::bomb_findings bombs;

  // (d)
  std::string skipped_d;
  bool status_answered = false;
  size_t ranks_seen = 0;
  std::string poll_decode, poll_prefill;  ///< what room_poll answered ("error: ..." or a state)
  uint32_t verdicts_sent = 0;
};

/// (a) A stranger's writes into the decode rank's KV memory.
void foreign_writes(findings& f) {
  int fd = dial(f.data_port);
  if (fd < 0) {
    f.error = "cannot connect to the decode data port " + std::to_string(f.data_port);
    return;
  }
  auto hello = hello_bytes("stranger:6666");
  send_bytes(fd, hello.data(), hello.size());
  kvferry::transport::challenge c;
  if (recv_bytes(fd, &c, sizeof(c), 3000ms) == sizeof(c))
    f.challenged = c.magic == kvferry::transport::challenge_magic && c.required == 1;
  std::array<uint8_t, 32> garbage;
  std::mt19937 rng{13};
  for (auto& b : garbage)
    b = static_cast<uint8_t>(rng());
  send_bytes(fd, garbage.data(), garbage.size());
  kvferry::transport::auth_result r;
  if (recv_bytes(fd, &r, sizeof(r), 3000ms) == sizeof(r))
    f.refused = r.magic == kvferry::transport::auth_result_magic && r.accepted == 0;
  // Batches at guessed regions and offsets, fence 0 (most sends fail: closed).
  for (uint32_t k = 0; k < 200; ++k) {
    auto b = batch_bytes(k % 8, (k / 8) * 4096, 64, k);
    if (!send_bytes(fd, b.data(), b.size()))
      break;
    ++f.batches_sent;
  }
  auto count_acks = [&f](int sock) {
    for (;;) {
      wire::ack_header a;
      if (recv_bytes(sock, &a, sizeof(a), 1500ms) != sizeof(a))
        return;
      ++f.acks_any;
      if (a.magic == wire::ack_magic && a.code == 0)
        ++f.acks_ok;
      std::vector<char> msg(std::min<uint32_t>(a.message_len, wire::max_ack_message));
      recv_bytes(sock, msg.data(), msg.size(), 1000ms);
    }
  };
  count_acks(fd);
  f.closed_after_refusal = wait_closed({fd}, 3000ms)[0] == ending::closed;
  ::close(fd);

  // A second stranger: no answer at all, batches right after the hello (its
  // first 32 bytes are taken for the answer).
  fd = dial(f.data_port);
  if (fd < 0)
    return;
  hello = hello_bytes("prefill-0 tp0 pp0");
  send_bytes(fd, hello.data(), hello.size());
  recv_bytes(fd, &c, sizeof(c), 3000ms);
  for (uint32_t k = 0; k < 200; ++k) {
    auto b = batch_bytes(k % 4, k * 64, 64, 1000 + k);
    if (!send_bytes(fd, b.data(), b.size()))
      break;
    ++f.batches_sent;
  }
  // An auth result (refused) may come first: skip it, then count acks.
  recv_bytes(fd, &r, sizeof(r), 1500ms);
  count_acks(fd);
  f.silent_closed = wait_closed({fd}, 3000ms)[0] == ending::closed;
  ::close(fd);
}

/// (b) Connections that stall after a hello (or a garbage answer and a batch
/// header announcing the most ops a batch may have).
void exhaustion(findings& f) {
  f.rss_before = rss_kib(f.decode_pid);
  std::vector<int> fds;
  for (int k = 0; k < 40; ++k) {
    int fd = dial(f.data_port);
    if (fd < 0)
      continue;
    ++f.stall_opened;
    auto hello = hello_bytes("staller-" + std::to_string(k));
    send_bytes(fd, hello.data(), hello.size());
    if (k >= 20) {
      std::string rest(32, '\x33');
      wire::batch_header bh;
      bh.n_ops = wire::max_ops_per_batch;
      bh.payload_bytes = uint64_t{1} << 40;
      rest.append(reinterpret_cast<const char*>(&bh), sizeof(bh));
      send_bytes(fd, rest.data(), rest.size());
    }
    fds.push_back(fd);
  }
  // RSS while they stall (the receiver gives a hello 5 s to be answered).
  f.rss_peak = f.rss_before;
  auto until = steady::now() + 2500ms;
  while (steady::now() < until) {
    f.rss_peak = std::max(f.rss_peak, rss_kib(f.decode_pid));
    std::this_thread::sleep_for(100ms);
  }
  auto ends = wait_closed(fds, 6000ms);
  f.stall_closed = static_cast<int>(std::count(ends.begin(), ends.end(), ending::closed));
  f.rss_peak = std::max(f.rss_peak, rss_kib(f.decode_pid));
  for (int fd : fds)
    ::close(fd);
  std::this_thread::sleep_for(300ms);
  f.rss_after = rss_kib(f.decode_pid);
}

/// (c) Garbage of several shapes on every listening port of both nodes.
void garbage(findings& f) {
  std::mt19937 rng{42};
  std::string random_bytes(4096, '\0');
  for (auto& ch : random_bytes)
    ch = static_cast<char>(rng());
  // Every length-like field at its largest (0xff...): a frame that would
  // announce gigabytes on any protocol that reads a length first.
  std::string huge(64, '\xff');
  // A tcp hello announcing a 10-byte name, 3 of them sent.
  wire::hello th;
  th.name_len = 10;
  std::string truncated(reinterpret_cast<const char*>(&th), sizeof(th));
  truncated += "abc";
  std::string http = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: curl/8\r\n\r\n";
  std::vector<std::pair<std::string, std::string>> shapes{{"random bytes", random_bytes},
                                                          {"huge length fields", huge},
                                                          {"truncated frame", truncated},
                                                          {"plain HTTP", http}};

  std::vector<std::pair<uint16_t, std::string>> targets;
  for (auto p : f.decode_ports)
    targets.emplace_back(p, "decode-node");
  for (auto p : f.prefill_ports)
    targets.emplace_back(p, "prefill-node");
  std::vector<int> fds;
  for (auto& [port, owner] : targets)
    for (auto& [shape, bytes] : shapes) {
      int fd = dial(port);
      f.probes.push_back({port, owner, shape, false});
      if (fd >= 0)
        send_bytes(fd, bytes.data(), bytes.size());
      fds.push_back(fd);
    }
  // A data port drops a peer that has not said hello within 5 s.
  auto ends = wait_closed(fds, 8000ms);
  for (size_t i = 0; i < fds.size(); ++i) {
    f.probes[i].dropped = fds[i] < 0 || ends[i] == ending::closed;
    if (fds[i] >= 0)
      ::close(fds[i]);
  }
  // Every listener still accepts; the data port still challenges.
  for (auto& [port, owner] : targets) {
    int fd = dial(port);
    f.accepts_after[port] = fd >= 0;
    if (fd >= 0 && port == f.data_port) {
      auto hello = hello_bytes("after-the-garbage");
      send_bytes(fd, hello.data(), hello.size());
      kvferry::transport::challenge c;
      f.data_port_still_challenges[port] = recv_bytes(fd, &c, sizeof(c), 3000ms) == sizeof(c) &&
                                           c.magic == kvferry::transport::challenge_magic;
    }
    if (fd >= 0)
      ::close(fd);
  }
}

/// (d) A CAF client with no credentials: status, room_poll, forged verdicts.
void forged(findings& f, caf::actor_system& sys, uint16_t status_port) {
  auto status = sys.middleman().remote_actor<kvferry::status_actor>("127.0.0.1", status_port);
  if (!status) {
    f.skipped_d = "no status actor at port " + std::to_string(status_port) + ": " +
                  sys.render(status.error());
    return;
  }
  caf::scoped_actor self{sys};
  kvferry::node_status st;
  self->request(*status, 3s, kvferry::status_atom_v)
      .receive(
          [&](kvferry::node_status& s) {
            st = std::move(s);
            f.status_answered = true;
          },
          [&](caf::error&) {});
  f.ranks_seen = st.ranks.size();
  for (auto& r : st.ranks) {
    if (!r.last.actor)
      continue;
    auto rank = caf::actor_cast<caf::actor>(r.last.actor);
    std::string answer = "no answer";
    self->request(rank, 3s, kvferry::room_poll_atom_v, uint64_t{1})
        .receive([&](kvferry::room_status&) { answer = "a room status"; },
                 [&](caf::error& e) { answer = "error: " + sys.render(e); });
    (r.last.role == "decode" ? f.poll_decode : f.poll_prefill) = answer;
    // Success verdicts for guessed keys: the first rooms, generations 0..3,
    // and the rooms the workload opens about now.
    for (uint64_t room = 0; room < 400; ++room)
      for (uint64_t gen = 0; gen < 4; ++gen) {
        kvferry::room_verdict v;
        v.key = kvferry::room_key{room, gen};
        v.outcome = kvferry::kv_poll::success;
        self->send(rank, v);
        ++f.verdicts_sent;
      }
  }
}

std::string cluster(uint32_t requests, uint32_t per_second, uint16_t data_port) {
  std::ostringstream f;
  f << "transport = \"tcp\"\nprocesses = \"per-node\"\n\n"
    << "[deadlines]\nbootstrap = \"10s\"\ntransfer = \"20s\"\nverdict = \"5s\"\n\n"
    << "[heartbeat]\ninterval = \"200ms\"\nmisses = 5\n\n"
    << "[workload]\nrequests = " << requests << "\nrequests_per_second = " << per_second
    << "\nmin_tokens = 16\nmax_tokens = 96\npage_size = 16\npool_pages = 96\n"
    << "chunk_pages = 4\nconcurrency = 8\nseed = 42\nmodel = \"tiny\"\nprogress = \"5s\"\n\n";
  for (auto n : {"prefill-node", "decode-node"})
    f << "[[node]]\nname = \"" << n << "\"\nhost = \"127.0.0.1\"\nstatus_port = " << free_port()
      << "\nmetrics_port = " << free_port() << "\n\n";
  f << "[[instance]]\nname = \"prefill-0\"\nrole = \"prefill\"\nnode = \"prefill-node\"\ntp = 1\n"
    << "pp = 1\nbootstrap_port = " << free_port() << "\n\n";
  f << "[[instance]]\nname = \"decode-0\"\nrole = \"decode\"\nnode = \"decode-node\"\ntp = 1\n"
    << "pp = 1\ndata_port = " << data_port << "\nprefill = \"prefill-0\"\n";
  return f.str();
}

uint16_t status_port_of(const std::string& text, const std::string& node) {
  auto at = text.find("name = \"" + node + "\"");
  at = text.find("status_port = ", at);
  return static_cast<uint16_t>(std::stoul(text.substr(at + 14)));
}

}  // namespace

TEST_CASE(
    "hostile peers: foreign writes, stalled connections, garbage on every port and forged "
    "verdicts change nothing of a verified 1P1D run",
    "[launch][process][hostile]") {
  ::signal(SIGPIPE, SIG_IGN);
  // KVFERRY_HOSTILE_REQUESTS=4800: the issue's attack, 60 s of rooms.
  auto* n = std::getenv("KVFERRY_HOSTILE_REQUESTS");
  const uint32_t requests = n ? static_cast<uint32_t>(std::strtoul(n, nullptr, 10)) : 2800,
                 per_second = 80;  // 35 s of rooms
  const uint16_t data_port = free_port();
  auto text = cluster(requests, per_second, data_port);
  char name[] = "/tmp/kvferry-hostile-XXXXXX.toml";
  int tmp = ::mkstemps(name, 5);
  REQUIRE(tmp >= 0);
  ::close(tmp);
  std::ofstream{name} << text;
  std::string path = name;
  auto started = steady::now();

  child_process run{{launcher, "--cluster=" + path, "--local",
                     "--local-timeout=" + std::to_string(requests / per_second + 50)}};
  REQUIRE(run.wait_for_line(
      [](const std::string& l) { return l.find("decode-0: decode TP") != std::string::npos; },
      60s));
  // Both node processes up, the decode rank's data port listening.
  findings f;
  f.data_port = data_port;
  std::vector<int> d, p;
  for (auto until = steady::now() + 45s; steady::now() < until;) {
    d = pids_with("--cluster=" + path + " --node=decode-node");
    p = pids_with("--cluster=" + path + " --node=prefill-node");
    if (d.size() == 1 && p.size() == 1 && listening_ports(d.front()).count(data_port))
      break;
    run.wait_for_line([](const std::string&) { return false; }, 200ms);
  }
  REQUIRE(d.size() == 1);
  REQUIRE(p.size() == 1);
  f.decode_pid = d.front();
  f.prefill_pid = p.front();
  // The first rooms.
  run.wait_for_line([](const std::string&) { return false; }, 1500ms);
  f.decode_ports = listening_ports(f.decode_pid);
  f.prefill_ports = listening_ports(f.prefill_pid);
  INFO("decode node pid " << f.decode_pid << ", prefill node pid " << f.prefill_pid);
  REQUIRE(f.decode_ports.count(data_port));

  kvferry::config cfg;
  caf::actor_system sys{cfg};
  std::atomic<bool> attacked{false};
  std::thread attacker{[&] {
    foreign_writes(f);
    exhaustion(f);
    garbage(f);
    f.bombs = kvferry::test::bomb_caf_ports({f.decode_pid, f.decode_ports},
                                            {f.prefill_pid, f.prefill_ports});
    forged(f, sys, status_port_of(text, "decode-node"));
    attacked = true;
  }};
  // Read the launcher's output meanwhile (a child whose pipe is full blocks).
  auto attack_deadline = steady::now() + 80s;
  while (!attacked && steady::now() < attack_deadline)
    run.wait_for_line([](const std::string&) { return false; }, 200ms);
  bool running_after_attacks = !run.exited();
  attacker.join();  // every step of it is bounded
  auto attack_seconds = std::chrono::duration<double>(steady::now() - started).count();

  int rc = run.wait(std::chrono::seconds{requests / per_second + 40});
  auto out = run.output();
  auto total_seconds = std::chrono::duration<double>(steady::now() - started).count();
  std::ofstream{"/tmp/kvferry-hostile-last.log"} << out;
  INFO(out.substr(out.size() > 20000 ? out.size() - 20000 : 0));

  std::ostringstream ports;
  for (auto& pr : f.probes)
    ports << pr.owner << ":" << pr.port << " " << pr.shape << ": "
          << (pr.dropped ? "dropped" : "STILL OPEN") << "\n";
  std::fprintf(stderr,
               "hostile: decode RSS %ld KiB before the stalls, %ld KiB peak, %ld KiB after "
               "(%d stalled connections, %d closed by the receiver)\n"
               "hostile: decode ports %zu, prefill ports %zu, %zu garbage probes\n%s"
               "hostile: attacks done at +%.1f s, run ended at +%.1f s\n",
               f.rss_before, f.rss_peak, f.rss_after, f.stall_opened, f.stall_closed,
               f.decode_ports.size(), f.prefill_ports.size(), f.probes.size(), ports.str().c_str(),
               attack_seconds, total_seconds);
  INFO(ports.str());
  REQUIRE(f.error.empty());
  CHECK(running_after_attacks);  // the attacks hit a serving cluster

  // (a) refused, closed, nothing acknowledged.
  CHECK(f.challenged);
  CHECK(f.refused);
  CHECK(f.closed_after_refusal);
  CHECK(f.silent_closed);
  CHECK(f.acks_ok == 0u);
  CHECK(f.acks_any == 0u);

  // (b) bounded: the stalls cost no memory to speak of and are closed.
  CHECK(f.stall_opened == 40);
  CHECK(f.stall_closed == f.stall_opened);
  CHECK(f.rss_peak - f.rss_before < 64 * 1024);

  // (c) every garbage connection dropped; every listener still accepts.
  CHECK(f.decode_ports.size() >= 2);   // data, status
  CHECK(f.prefill_ports.size() >= 3);  // bootstrap, status, decider (and its data port)
  // The data ports (tcp://HOST:PORT in each instance's line); the rest are CAF's.
  std::set<uint16_t> data_ports;
  std::regex dp{R"(here on tcp \(tcp://127\.0\.0\.1:(\d+)\))"};
  for (auto i = std::sregex_iterator(out.begin(), out.end(), dp); i != std::sregex_iterator(); ++i)
    data_ports.insert(static_cast<uint16_t>(std::stoul((*i)[1])));
  CHECK(data_ports.count(data_port));
  // Every shape on every port, a CAF port's truncated frame included: the
  // guard closes a connection whose BASP handshake is not in within 5 s.
  for (auto& pr : f.probes) {
    INFO(pr.owner << " port " << pr.port << ": " << pr.shape);
    CHECK(pr.dropped);
  }
  for (auto& [port, ok] : f.accepts_after) {
    INFO("port " << port << " accepts after the garbage");
    CHECK(ok);
  }
  CHECK(f.data_port_still_challenges[data_port]);

  // (d) the status actor answers a stranger (it is not secret who runs), but
  // a rank refuses its poll and drops its verdicts.
  if (!f.skipped_d.empty()) {
    WARN("(d) skipped: " << f.skipped_d);
  } else {
    CHECK(f.status_answered);
    CHECK(f.ranks_seen >= 1u);
    INFO("room_poll on the decode rank: " << f.poll_decode);
    CHECK(f.poll_decode.rfind("error", 0) == 0);
    if (!f.poll_prefill.empty()) {
      INFO("room_poll on the prefill rank: " << f.poll_prefill);
      CHECK(f.poll_prefill.rfind("error", 0) == 0);
    }
    CHECK(f.verdicts_sent > 0u);
  }

  // (e) BASP bombs, drips and a crowd: closed, and no node's memory moved.
  kvferry::test::check_bombs_cost_nothing(f.bombs);

  // The workload: it ended by itself, every room Success, verified, agreed.
  REQUIRE(rc == 0);
  check_every_room(out, requests);
  CHECK_THAT(out, Catch::Contains("prefill-0 prefill: " + std::to_string(requests) +
                                  " requests on 1 rank, " + std::to_string(requests) + " Success"));
  // The drops were said (once per sender), the run went on.
  CHECK_THAT(out, Catch::Contains("not a sender it may come from"));
  CHECK(total_seconds < requests / per_second + 45);
  ::unlink(path.c_str());
}
