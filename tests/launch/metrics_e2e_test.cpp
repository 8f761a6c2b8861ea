// Each node's /metrics as Prometheus and an operator meet it: real
// kvferry-launch processes on loopback (1P1D, a free port for everything),
// scraped over HTTP once their workload is done (--linger), the exposition
// checked against the format's rules (apps/ctl/prometheus_text.hpp) and
// its counters against the run's own report; the same after the prefill node
// is killed mid-run (failures by code and origin); and a stranger's bytes on
// the metrics port, which cost nothing but a 400.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "apps/common/child_process.hpp"
#include "apps/ctl/prometheus_text.hpp"
#include "tests/support/free_port.hpp"
#include "tests/support/loopback_dial.hpp"

using namespace kvferry::apps;
using namespace std::chrono_literals;

namespace {

const std::string launcher = KVFERRY_LAUNCH_PATH;
const std::string ctl = KVFERRY_CTL_PATH;

using kvferry::test::free_port;

std::string replace(std::string text, const std::string& from, const std::string& to) {
  auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

struct ports {
  uint16_t prefill_metrics = free_port();
  uint16_t decode_metrics = free_port();
};

/// The 1P1D example on free ports, with /metrics on both nodes.
std::string cluster_1p1d(const ports& p, const std::string& workload) {
  std::ifstream in{std::string{KVFERRY_SOURCE_DIR} + "/deploy/clusters/1p1d.toml"};
  std::stringstream buf;
  buf << in.rdbuf();
  auto text = buf.str();
  text = replace(text, "bootstrap_port = 17000", "bootstrap_port = " + std::to_string(free_port()));
  text = replace(text, "status_port = 17010",
                 "status_port = " + std::to_string(free_port()) +
                     "\nmetrics_port = " + std::to_string(p.prefill_metrics));
  text = replace(text, "status_port = 17011",
                 "status_port = " + std::to_string(free_port()) +
                     "\nmetrics_port = " + std::to_string(p.decode_metrics));
  return replace(text, "requests = 200", workload);
}

/// The same without a workload: the nodes serve until stopped.
std::string serving_1p1d(const ports& p) {
  auto text = cluster_1p1d(p, "requests = 1");
  auto cut = text.find("[workload]");
  return text.erase(cut, text.find("[[node]]") - cut);
}

std::string temp_cluster(const std::string& text) {
  char name[] = "/tmp/kvferry-metrics-XXXXXX.toml";
  int fd = ::mkstemps(name, 5);
  REQUIRE(fd >= 0);
  ::close(fd);
  std::ofstream{name} << text;
  return name;
}

/// Sends `request` to 127.0.0.1:port and returns all it answers (until the
/// server closes, at most 10 s).
std::string talk(uint16_t port, const std::string& request) {
  int fd = kvferry::test::dial_loopback(port);
  if (fd < 0)
    return {};
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string out;
  char buf[65536];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;)
    out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

struct http_answer {
  int status = 0;
  std::string headers;
  std::string body;
};

http_answer http_get(uint16_t port, const std::string& path) {
  auto raw =
      talk(port, "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  http_answer a;
  auto split = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.1 ", 0) != 0 || split == std::string::npos)
    return a;
  a.status = std::stoi(raw.substr(9, 3));
  a.headers = raw.substr(0, split);
  a.body = raw.substr(split + 4);
  return a;
}

kvferry::prom::prom_exposition scrape(uint16_t port) {
  auto a = http_get(port, "/metrics");
  INFO(a.headers);
  REQUIRE(a.status == 200);
  CHECK_THAT(a.headers, Catch::Contains("text/plain; version=0.0.4"));
  try {
    return kvferry::prom::parse_prometheus(a.body);
  } catch (const std::exception& e) {
    FAIL("not Prometheus text: " << e.what() << "\n" << a.body);
  }
  return {};
}

bool done(const std::string& line) {
  return line.find(" lingers:") != std::string::npos;
}

/// "N" of "... WORD: N" in the report line of `side` ("decode-0 decode"), or -1.
long figure(const std::string& output, const std::string& pattern) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex{pattern}))
    return -1;
  return std::stol(m[1]);
}

}  // namespace

TEST_CASE("a node's /metrics agrees with its run's report", "[launch][process][metrics]") {
  ports p;
  auto path = temp_cluster(cluster_1p1d(p, "requests = 40"));
  child_process prefill{{launcher, "--cluster=" + path, "--node=prefill-node", "--linger"}};
  child_process decode{{launcher, "--cluster=" + path, "--node=decode-node", "--linger"}};
  REQUIRE(decode.wait_for_line(done, 120s));
  REQUIRE(prefill.wait_for_line(done, 60s));
  INFO(decode.output());
  INFO(prefill.output());
  CHECK_THAT(decode.output(), Catch::Contains("metrics of node decode-node at http://127.0.0.1:" +
                                              std::to_string(p.decode_metrics) + "/metrics"));
  CHECK_THAT(decode.output(),
             Catch::Contains("decode-0 decode: 40 requests on 1 rank, 40 Success"));

  auto d = scrape(p.decode_metrics);
  std::map<std::string, std::string> dec{{"kv_instance", "decode-0"}};
  auto with = [](std::map<std::string, std::string> m, std::string k, std::string v) {
    m[k] = v;
    return m;
  };
  CHECK(d.sum("kvferry_rooms_total", with(dec, "outcome", "success")) == 40);
  CHECK(d.sum("kvferry_rooms_total", with(dec, "outcome", "failed")) == 0);
  CHECK(d.sum("kvferry_rooms_in_flight", dec) == 0);
  CHECK(d.count("kvferry_rooms_in_flight") == 3);  // one series per live state
  CHECK(d.sum("kvferry_room_seconds_count", with(dec, "outcome", "success")) == 40);
  CHECK(d.sum("kvferry_verdict_seconds_count", with(dec, "outcome", "success")) == 40);
  CHECK(d.sum("kvferry_room_failures_total") == 0);
  CHECK(d.sum("kvferry_node_ranks", {{"node", "decode-node"}, {"state", "up"}}) == 1);
  CHECK(d.sum("kvferry_node_ranks", {{"node", "decode-node"}, {"state", "down"}}) == 0);
  CHECK(d.sum("kvferry_process_resident_bytes", {{"process", "node decode-node"}}) > 1e6);
  CHECK(d.sum("kvferry_process_open_connections") >= 1);  // its link to the prefill node
  // Peers the decider watched are up (those it pinged, if any: a fast run
  // may end before its first heartbeat round).
  for (auto& smp : d.samples)
    if (smp.name == "kvferry_peer_up")
      CHECK(smp.value == 1);

  auto f = scrape(p.prefill_metrics);
  std::map<std::string, std::string> pre{{"kv_instance", "prefill-0"}};
  CHECK(f.sum("kvferry_rooms_total", with(pre, "outcome", "success")) == 40);
  // Bytes posted to the decode rank: the bytes its report counts (KV and aux
  // rows of the 40 rooms), each batch once.
  auto bytes = figure(prefill.output(), R"(prefill: (\d+) bytes in)");
  CHECK(bytes > 0);
  CHECK(f.sum("kvferry_transfer_bytes_total", {{"peer", "decode-0 tp0 pp0"}}) == bytes);
  CHECK(f.sum("kvferry_transfer_batches_total") >= 40);
  CHECK(f.sum("kvferry_transfer_failed_batches_total") == 0);

  // kvferry-ctl shows where each node's metrics are.
  child_process st{{ctl, "--cluster=" + path, "status"}};
  st.wait(30s);
  CHECK_THAT(st.output(), Catch::Contains("metrics at http://127.0.0.1:" +
                                          std::to_string(p.decode_metrics) + "/metrics"));

  // The trace of a room that succeeded: both ranks, its chunks, the verdict.
  child_process tr{{ctl, "--cluster=" + path, "trace", "1"}};
  CHECK(tr.wait(30s) == 0);
  INFO(tr.output());
  CHECK_THAT(tr.output(), Catch::Contains("from 2 ranks"));
  CHECK_THAT(tr.output(), Catch::Contains("prefill-0 tp0 pp0"));
  CHECK_THAT(tr.output(), Catch::Contains("opened (Bootstrapping)"));
  CHECK_THAT(tr.output(), Catch::Contains(" written to decode-0 tp0 pp0"));
  CHECK_THAT(tr.output(), Catch::Contains(" landed from prefill-0 tp0 pp0"));
  CHECK_THAT(tr.output(), Catch::Contains("verdict Success from the decider"));
  CHECK_THAT(tr.output(), Catch::Contains("handshake (opened to WaitingForInput): "));
  CHECK_THAT(tr.output(), Catch::Contains("outcome: Success on 2 of 2 ranks"));
  child_process none{{ctl, "--cluster=" + path, "trace", "999999"}};
  CHECK(none.wait(30s) == 1);
  CHECK_THAT(none.output(), Catch::Contains("no rank holds it"));
  child_process bad{{ctl, "--cluster=" + path, "trace", "abc"}};
  CHECK(bad.wait(30s) == 2);
  CHECK_THAT(bad.output(), Catch::Contains("trace abc: expected one room id, a number"));

  // The live view, as a pipe sees it: one table per refresh.
  child_process top{{ctl, "--cluster=" + path, "top", "--iterations=2"}};
  CHECK(top.wait(30s) == 0);
  INFO(top.output());
  auto tables = top.output();
  size_t headers = 0;
  for (size_t at = 0; (at = tables.find("ROOMS/S", at)) != std::string::npos; ++at)
    ++headers;
  CHECK(headers == 2);  // --iterations=2
  CHECK_THAT(tables, Catch::Contains("INSTANCE       ROLE     RANK"));
  CHECK_THAT(tables, Catch::Contains("decode-0       decode   all"));
  CHECK_THAT(tables, Catch::Contains("prefill-0      prefill  all"));

  ::kill(decode.pid(), SIGTERM);
  ::kill(prefill.pid(), SIGTERM);
  CHECK(decode.wait(30s) == 0);  // the workload's exit code
  CHECK(prefill.wait(30s) == 0);
  ::unlink(path.c_str());
}

TEST_CASE("a per-rank node serves its children's figures", "[launch][process][metrics]") {
  ports p;
  auto path = temp_cluster(cluster_1p1d(p, "requests = 30"));
  child_process prefill{
      {launcher, "--cluster=" + path, "--node=prefill-node", "--processes=per-rank", "--linger"}};
  child_process decode{
      {launcher, "--cluster=" + path, "--node=decode-node", "--processes=per-rank", "--linger"}};
  REQUIRE(decode.wait_for_line(done, 120s));
  REQUIRE(prefill.wait_for_line(done, 60s));
  INFO(decode.output());
  auto d = scrape(p.decode_metrics);
  // The child's last report carried its figures: every room, and its process.
  CHECK(d.sum("kvferry_rooms_total", {{"kv_instance", "decode-0"}, {"outcome", "success"}}) == 30);
  CHECK(d.sum("kvferry_process_resident_bytes", {{"process", "decode-0/0"}}) > 1e6);
  CHECK(d.sum("kvferry_process_resident_bytes", {{"process", "node decode-node"}}) > 1e6);
  // The node's own figures: its decider.
  CHECK(d.sum("kvferry_verdict_seconds_count", {{"kv_instance", "decode-0"}}) == 30);
  auto f = scrape(p.prefill_metrics);
  CHECK(f.sum("kvferry_transfer_batches_total", {{"kv_instance", "prefill-0"}}) >= 30);
  ::kill(decode.pid(), SIGTERM);
  ::kill(prefill.pid(), SIGTERM);
  CHECK(decode.wait(30s) == 0);
  CHECK(prefill.wait(30s) == 0);
  ::unlink(path.c_str());
}

TEST_CASE("a stranger's bytes on the metrics port cost it nothing", "[launch][process][metrics]") {
  ports p;
  auto path = temp_cluster(serving_1p1d(p));
  child_process prefill{{launcher, "--cluster=" + path, "--node=prefill-node"}};
  REQUIRE(prefill.wait_for_line(
      [](const std::string& l) { return l.find("serving") != std::string::npos; }, 30s));
  auto port = p.prefill_metrics;

  CHECK(http_get(port, "/nowhere").status == 404);
  CHECK(http_get(port, "/").status == 200);
  auto garbage = talk(port, std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11) +
                                std::string(5000, '\xff') + "\r\n\r\n");
  CHECK(garbage.rfind("HTTP/1.1 400", 0) == 0);
  auto huge = talk(port, "POST /metrics HTTP/1.1\r\nContent-Length: 100000000\r\n\r\n" +
                             std::string(100000, 'x'));
  CHECK(huge.rfind("HTTP/1.1 4", 0) == 0);
  // A client that connects and says nothing, and many at once: the scrape
  // still answers.
  std::vector<int> silent;
  for (int i = 0; i < 20; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    silent.push_back(fd);
  }
  auto e = scrape(port);
  CHECK(e.sum("kvferry_node_ranks", {{"node", "prefill-node"}, {"state", "up"}}) == 1);
  for (int fd : silent)
    ::close(fd);
  ::kill(prefill.pid(), SIGTERM);
  CHECK(prefill.wait(30s) == 0);
  ::unlink(path.c_str());
}

TEST_CASE("a killed prefill node shows in the decode node's failure counters",
          "[launch][process][metrics]") {
  ports p;
  // Paced, so that rooms are still to come when the prefill node dies.
  // A short Bootstrapping deadline: rooms to the dead instance that do not
  // fail at once wait no longer than that.
  auto path = temp_cluster(replace(cluster_1p1d(p, "requests = 120\nrequests_per_second = 40"),
                                   "bootstrap = \"20s\"", "bootstrap = \"5s\""));
  child_process prefill{{launcher, "--cluster=" + path, "--node=prefill-node"}};
  child_process decode{{launcher, "--cluster=" + path, "--node=decode-node", "--linger"}};
  REQUIRE(decode.wait_for_line(
      [](const std::string& l) { return l.find("decode-0: decode TP 1") != std::string::npos; },
      60s));
  std::this_thread::sleep_for(1500ms);  // about 50 rooms in
  ::kill(prefill.pid(), SIGKILL);
  prefill.wait(10s);
  REQUIRE(decode.wait_for_line(done, 180s));
  INFO(decode.output());
  auto failed = figure(decode.output(),
                       R"(decode-0 decode: 120 requests on 1 rank, \d+ Success, (\d+) Failed)");
  auto success =
      figure(decode.output(), R"(decode-0 decode: 120 requests on 1 rank, (\d+) Success)");
  REQUIRE(failed > 0);

  auto d = scrape(p.decode_metrics);
  std::map<std::string, std::string> dec{{"kv_instance", "decode-0"}, {"role", "decode"}};
  auto with = [](std::map<std::string, std::string> m, std::string k, std::string v) {
    m[k] = v;
    return m;
  };
  CHECK(d.sum("kvferry_rooms_total", with(dec, "outcome", "failed")) == failed);
  CHECK(d.sum("kvferry_rooms_total", with(dec, "outcome", "success")) == success);
  CHECK(d.sum("kvferry_room_failures_total", dec) == failed);
  // Each code the report names, as many times as it says.
  std::regex code_line{R"(decode: failed with (\w+): (\d+))"};
  auto out = decode.output();
  long named = 0;
  for (std::sregex_iterator i{out.begin(), out.end(), code_line}, end; i != end; ++i) {
    auto code = (*i)[1].str();
    auto n = std::stol((*i)[2].str());
    CHECK(d.sum("kvferry_room_failures_total", with(dec, "code", code)) == n);
    named += n;
  }
  CHECK(named == failed);
  CHECK(d.sum("kvferry_rooms_in_flight", dec) == 0);
  // Rooms opened once the instance was known down failed at once, whether
  // the decode rank heard of it from its link or from the decider's verdict
  // of lost contact first (then its bootstrap cannot be reached): none waits
  // out its Bootstrapping deadline.
  CHECK(d.sum("kvferry_fast_fail_total", dec) > 0);
  CHECK(d.sum("kvferry_fast_fail_total", dec) <= failed);
  CHECK(d.sum("kvferry_room_failures_total", with(dec, "code", "bootstrap_unreachable")) == 0);
  // The decider saw the prefill rank go.
  CHECK(d.sum("kvferry_peer_up", {{"peer", "prefill-0 tp0 pp0"}}) == 0);

  // The trace of a failed room: its first cause and how the verdict
  // travelled; the dead node is named as not answering.
  std::smatch m;
  REQUIRE(std::regex_search(out, m, std::regex{R"(KVTransferError\(room (\d+)#)"}));
  child_process tr{{ctl, "--cluster=" + path, "trace", m[1].str(), "--timeout=2s"}};
  CHECK(tr.wait(30s) == 0);
  INFO(tr.output());
  CHECK_THAT(tr.output(), Catch::Contains("first cause: "));
  CHECK_THAT(tr.output(), Catch::Contains("the verdict travelled:"));
  CHECK_THAT(tr.output(), Catch::Contains("decode-0 tp0 pp0"));
  CHECK_THAT(tr.output(), Catch::Contains("Failed"));
  CHECK_THAT(tr.output(), Catch::Contains("not asked or no answer: node prefill-node"));
  child_process js{{ctl, "--cluster=" + path, "trace", m[1].str(), "--json", "--timeout=2s"}};
  CHECK(js.wait(30s) == 0);
  CHECK_THAT(js.output(), Catch::StartsWith("{\"room\":" + m[1].str() + ","));
  CHECK_THAT(js.output(), Catch::Contains("\"first_cause\":{\"rank\":\"decode-0 tp0 pp0\""));
  ::kill(decode.pid(), SIGTERM);
  CHECK(decode.wait(30s) == 1);  // rooms failed: the workload's exit code
  ::unlink(path.c_str());
}

TEST_CASE("kvferry-ctl top draws over itself in a terminal and quits on q",
          "[launch][process][metrics]") {
  if (::system("command -v tmux >/dev/null 2>&1") != 0) {
    WARN("SKIPPED: no tmux on PATH (deploy/install-deps.sh installs it)");
    return;
  }
  ports p;
  auto path = temp_cluster(serving_1p1d(p));
  child_process prefill{{launcher, "--cluster=" + path, "--node=prefill-node"}};
  child_process decode{{launcher, "--cluster=" + path, "--node=decode-node"}};
  auto serving = [](const std::string& l) { return l.find("serving") != std::string::npos; };
  REQUIRE(prefill.wait_for_line(serving, 30s));
  REQUIRE(decode.wait_for_line(serving, 30s));

  auto session = "kvferry-top-" + std::to_string(::getpid());
  auto sh = [](const std::string& cmd) { return ::system(cmd.c_str()); };
  REQUIRE(sh("tmux new-session -d -s " + session + " -x 120 -y 30 '" + ctl + " --cluster=" + path +
             " top'") == 0);
  std::this_thread::sleep_for(3500ms);  // three refreshes or more
  char name[] = "/tmp/kvferry-top-XXXXXX";
  int fd = ::mkstemp(name);
  ::close(fd);
  sh("tmux capture-pane -p -t " + session + " > " + name);
  std::ifstream in{name};
  std::stringstream buf;
  buf << in.rdbuf();
  auto screen = buf.str();
  ::unlink(name);
  INFO(screen);
  // One table on the screen, drawn over the last one: one header.
  size_t headers = 0;
  for (size_t at = 0; (at = screen.find("ROOMS/S", at)) != std::string::npos; ++at)
    ++headers;
  CHECK(headers == 1);
  CHECK_THAT(screen, Catch::Contains("q quits"));
  CHECK_THAT(screen, Catch::Contains("decode-0"));
  CHECK_THAT(screen, Catch::Contains("prefill-0"));
  CHECK_THAT(screen, Catch::Contains("tp0 pp0"));

  sh("tmux send-keys -t " + session + " q");
  bool gone = false;
  for (int i = 0; i < 50 && !gone; ++i) {
    std::this_thread::sleep_for(100ms);
    gone = sh("tmux has-session -t " + session + " 2>/dev/null") != 0;
  }
  CHECK(gone);  // top exited on q, and its pane with it
  if (!gone)
    sh("tmux kill-session -t " + session);
  ::kill(decode.pid(), SIGTERM);
  ::kill(prefill.pid(), SIGTERM);
  CHECK(decode.wait(30s) == 0);
  CHECK(prefill.wait(30s) == 0);
  ::unlink(path.c_str());
}
