// kvferry-launch as a user runs it: --local on the 1P1D example (a temp copy
// with free ports and fewer requests), one process per rank on the TP 4 -> 2
// example, a bad file refused before anything starts, a bootstrap port in use
// refused with its line, kvferry-ctl status on a serving cluster before
// and after one node is killed, and a per-rank child killed with SIGKILL and
// restarted by the file's restart policy. Every port is a free one picked at
// run time (free_port()), data ports any free one: no collisions between
// tests. And, in this process, the status actor's record of a rank's
// restarts.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>

#include "actors/process/config.hpp"
#include "apps/common/child_process.hpp"
#include "apps/launch/status_actor.hpp"
#include "messages/type_ids.hpp"
#include "tests/support/free_port.hpp"
#include "tests/support/workload_report.hpp"

using namespace kvferry::apps;
using namespace std::chrono_literals;

namespace {

using kvferry::test::free_port;

const std::string launcher = KVFERRY_LAUNCH_PATH;
const std::string ctl = KVFERRY_CTL_PATH;

/// A socket listening on a free loopback port; closed on destruction.
struct listener {
  int fd = -1;
  uint16_t port = 0;
  listener() {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
    REQUIRE(::listen(fd, 1) == 0);
    socklen_t len = sizeof(a);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~listener() { ::close(fd); }
};

std::string read_file(const std::string& path) {
  std::ifstream in{path};
  REQUIRE(in);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

std::string replace(std::string text, const std::string& from, const std::string& to) {
  auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

/// Writes `text` to a fresh temp file and returns its path.
std::string temp_cluster(const std::string& text) {
  char name[] = "/tmp/kvferry-cluster-XXXXXX.toml";
  int fd = ::mkstemps(name, 5);
  REQUIRE(fd >= 0);
  ::close(fd);
  std::ofstream{name} << text;
  return name;
}

/// The 1P1D example with its bootstrap on `port`, free status ports and 40 requests.
std::string small_1p1d(uint16_t port) {
  auto text = read_file(std::string{KVFERRY_SOURCE_DIR} + "/deploy/clusters/1p1d.toml");
  text = replace(text, "bootstrap_port = 17000", "bootstrap_port = " + std::to_string(port));
  text = replace(text, "status_port = 17010", "status_port = " + std::to_string(free_port()));
  text = replace(text, "status_port = 17011", "status_port = " + std::to_string(free_port()));
  return replace(text, "requests = 200", "requests = 40");
}

/// The output line that contains `needle` (empty if none).
std::string line_with(const std::string& text, const std::string& needle) {
  auto at = text.find(needle);
  if (at == std::string::npos)
    return {};
  auto begin = text.rfind('\n', at);
  begin = begin == std::string::npos ? 0 : begin + 1;
  return text.substr(begin, text.find('\n', at) - begin);
}

}  // namespace

TEST_CASE("kvferry-launch --local runs the 1P1D example end to end", "[launch][process]") {
  auto path = temp_cluster(small_1p1d(free_port()));
  child_process run{{launcher, "--cluster=" + path, "--local"}};
  int rc = run.wait(180s);
  INFO(run.output());
  CHECK(rc == 0);
  CHECK_THAT(run.output(), Catch::Contains("[decode-node] decode-0 decode: 40 requests on 1 rank, "
                                           "40 Success, 0 Failed, 40 verified byte for byte, 0 "
                                           "corrupted, 0 disagreements"));
  CHECK_THAT(
      run.output(),
      Catch::Contains("[prefill-node] prefill-0 prefill: 40 requests on 1 rank, 40 Success"));
  CHECK_THAT(run.output(), Catch::Contains("2 nodes, 0 failed"));
  ::unlink(path.c_str());
}

TEST_CASE("kvferry-launch refuses a bad file before it starts anything", "[launch][process]") {
  // Prefill TP 2 with decode TP 3: neither divides the other.
  auto text =
      replace(small_1p1d(free_port()), "tp = 1\npp = 1\nbootstrap", "tp = 2\npp = 1\nbootstrap");
  text = replace(text, "tp = 1\npp = 1\nprefill", "tp = 3\npp = 1\nprefill");
  auto path = temp_cluster(text);
  child_process run{{launcher, "--cluster=" + path, "--local"}};
  int rc = run.wait(30s);
  INFO(run.output());
  CHECK(rc == 2);
  CHECK_THAT(run.output(), Catch::Contains(path + ":"));
  CHECK_THAT(run.output(), Catch::Contains("one TP size must divide the other"));
  CHECK_THAT(run.output(), Catch::Contains("nothing started"));
  ::unlink(path.c_str());
}

TEST_CASE("kvferry-launch refuses a bootstrap port in use with the line of the port",
          "[launch][process]") {
  listener taken;
  auto text = small_1p1d(taken.port);
  auto path = temp_cluster(text);
  auto line = 1 + std::count(text.begin(), text.begin() + text.find("bootstrap_port = "), '\n');
  child_process run{{launcher, "--cluster=" + path, "--node=prefill-node"}};
  int rc = run.wait(30s);
  INFO(run.output());
  CHECK(rc == 1);
  CHECK_THAT(run.output(), Catch::Contains(path + ":" + std::to_string(line) +
                                           ": bootstrap_port = " + std::to_string(taken.port)));
  CHECK_THAT(run.output(), Catch::Contains("expected a free port on this host"));
  ::unlink(path.c_str());
}

TEST_CASE("kvferry-launch runs one process per rank on the TP 4 to 2 example",
          "[launch][process]") {
  auto text = read_file(std::string{KVFERRY_SOURCE_DIR} + "/deploy/clusters/tp4-to-tp2.toml");
  text = replace(text, "bootstrap_port = 17420", "bootstrap_port = " + std::to_string(free_port()));
  text = replace(text, "status_port = 17430", "status_port = " + std::to_string(free_port()));
  text = replace(text, "status_port = 17431", "status_port = " + std::to_string(free_port()));
  text = replace(text, "requests = 100", "requests = 24");
  auto path = temp_cluster(text);
  child_process run{{launcher, "--cluster=" + path, "--local"}};
  int rc = run.wait(180s);
  INFO(run.output());
  CHECK(rc == 0);
  // Each rank in its own process (its pid), under its node's launcher.
  for (int k = 0; k < 4; ++k)
    CHECK_THAT(run.output(),
               Catch::Contains("[prefill-node] [prefill-0/" + std::to_string(k) + "] prefill-0/" +
                               std::to_string(k) + " prefill: 24 requests on 1 rank, 24 Success"));
  for (int k = 0; k < 2; ++k)
    CHECK_THAT(run.output(), Catch::Contains("[decode-node] [decode-0/" + std::to_string(k) +
                                             "] decode-0/" + std::to_string(k) +
                                             " decode: 24 requests on 1 rank, 24 Success, 0 "
                                             "Failed, 24 verified byte for byte"));
  CHECK_THAT(run.output(), Catch::Contains("(per-rank processes)"));
  CHECK_THAT(run.output(), Catch::Contains("2 nodes, 0 failed"));
  ::unlink(path.c_str());
}

TEST_CASE(
    "a per-rank run's relayed lines are whole under a flood of debug logs and conclusions from "
    "six rank processes at once",
    "[launch][process][lines]") {
  // Debug logs (every room's every step, on stderr) and a conclusion per
  // rank per room (on stdout) from four prefill and two decode rank
  // processes, relayed by two node processes into one launcher: issue 30
  // saw a log line spliced into a conclusion.
  const int requests = 240;
  auto text = read_file(std::string{KVFERRY_SOURCE_DIR} + "/deploy/clusters/tp4-to-tp2.toml");
  text = replace(text, "bootstrap_port = 17420", "bootstrap_port = " + std::to_string(free_port()));
  text = replace(text, "status_port = 17430", "status_port = " + std::to_string(free_port()));
  text = replace(text, "status_port = 17431", "status_port = " + std::to_string(free_port()));
  text = replace(text, "requests = 100", "requests = " + std::to_string(requests));
  auto path = temp_cluster(text);
  ::setenv("KVFERRY_LOG_LEVEL", "debug", 1);
  child_process run{{launcher, "--cluster=" + path, "--local", "--print-conclusions"}};
  ::unsetenv("KVFERRY_LOG_LEVEL");
  int rc = run.wait(180s);
  auto& out = run.output();
  INFO(out.substr(out.size() > 20000 ? out.size() - 20000 : 0));
  REQUIRE(rc == 0);
  // A log line: relay prefixes, then its time and level first. A line with a
  // second time stamp, or a conclusion anywhere but at its start, was spliced.
  static const std::regex stamp{
      R"(\d\d:\d\d:\d\d\.\d{3} (trace|debug|info|warning|error|critical) kvferry )"};
  static const std::regex log_line{
      R"(^(?:\[[^\]]+\] )*\d\d:\d\d:\d\d\.\d{3} (trace|debug|info|warning|error|critical) kvferry .*$)"};
  std::istringstream in{out};
  size_t lines = 0, log_lines = 0, conclusion_lines = 0, spliced = 0;
  std::string first_spliced;
  for (std::string line; std::getline(in, line); ++lines) {
    auto stamps = std::distance(std::sregex_iterator(line.begin(), line.end(), stamp),
                                std::sregex_iterator());
    bool has_conclusion = line.find("conclusion ") != std::string::npos;
    bool whole =
        stamps == 0 || (stamps == 1 && !has_conclusion && std::regex_match(line, log_line));
    if (has_conclusion && whole)
      whole = !kvferry::test::conclusions_in(line).empty();
    log_lines += stamps == 1 ? 1 : 0;
    conclusion_lines += has_conclusion ? 1 : 0;
    if (!whole && spliced++ == 0)
      first_spliced = line;
  }
  std::fprintf(stderr, "lines: %zu relayed, %zu log lines, %zu conclusions, %zu spliced\n", lines,
               log_lines, conclusion_lines, spliced);
  INFO("first spliced line: " << first_spliced);
  CHECK(spliced == 0u);
  CHECK(log_lines > 5u * requests);  // a flood, not a trickle
  // Every rank's conclusion of every room, each a whole line.
  auto rooms = kvferry::test::conclusions_in(out);
  CHECK(rooms.size() == static_cast<size_t>(requests));
  for (auto& [room, cs] : rooms) {
    INFO("room " << room);
    CHECK(cs.size() == 6u);
  }
  ::unlink(path.c_str());
}

TEST_CASE("kvferry-launch --processes on the command line overrides the file",
          "[launch][process]") {
  auto path = temp_cluster(small_1p1d(free_port()));
  child_process run{{launcher, "--cluster=" + path, "--local", "--processes=per-rank"}};
  int rc = run.wait(180s);
  INFO(run.output());
  CHECK(rc == 0);
  CHECK_THAT(run.output(), Catch::Contains("[decode-node] [decode-0/0] decode-0/0 decode: 40 "
                                           "requests on 1 rank, 40 Success"));
  child_process bad{{launcher, "--cluster=" + path, "--local", "--processes=per-gpu"}};
  CHECK(bad.wait(30s) == 2);
  CHECK_THAT(bad.output(), Catch::Contains("--processes=per-gpu is not a process mode; expected "
                                           "per-rank or per-node"));
  ::unlink(path.c_str());
}

TEST_CASE("kvferry-ctl status reads a serving cluster and sees a killed node",
          "[launch][process]") {
  // 1P1D without a workload: the nodes serve until stopped.
  auto text = small_1p1d(free_port());
  auto cut = text.find("[workload]");
  text.erase(cut, text.find("[[node]]") - cut);
  auto path = temp_cluster(text);
  child_process prefill{{launcher, "--cluster=" + path, "--node=prefill-node"}};
  REQUIRE(prefill.wait_for_line(
      [](const std::string& l) { return l.find("serving") != std::string::npos; }, 30s));
  child_process decode{{launcher, "--cluster=" + path, "--node=decode-node"}};
  REQUIRE(decode.wait_for_line(
      [](const std::string& l) { return l.find("serving") != std::string::npos; }, 30s));

  child_process ok{{ctl, "--cluster=" + path, "status"}};
  CHECK(ok.wait(30s) == 0);
  INFO(ok.output());
  CHECK_THAT(ok.output(), Catch::Contains("node prefill-node (127.0.0.1): up"));
  CHECK_THAT(ok.output(), Catch::Contains("prefill-0/0  prefill-0 tp0 pp0"));
  CHECK_THAT(ok.output(), Catch::Contains("1/1 ranks registered"));
  CHECK_THAT(ok.output(), Catch::Contains("2/2 nodes answer, 2/2 ranks up, healthy"));

  ::kill(decode.pid(), SIGKILL);
  decode.wait(10s);
  child_process lost{{ctl, "--cluster=" + path, "status", "--timeout=2s"}};
  CHECK(lost.wait(30s) == 1);
  INFO(lost.output());
  CHECK_THAT(lost.output(), Catch::Contains("node decode-node (127.0.0.1): UNREACHABLE"));
  CHECK_THAT(lost.output(), Catch::Contains("UNHEALTHY"));
  // A prefill node's readiness does not depend on its decode peers.
  child_process probe{{ctl, "--cluster=" + path, "status", "--node=prefill-node"}};
  CHECK(probe.wait(30s) == 0);
  INFO(probe.output());
  CHECK(line_with(probe.output(), "summary:") ==
        "summary: 1/1 nodes answer, 1/1 ranks up, healthy");
  ::kill(prefill.pid(), SIGTERM);
  CHECK(prefill.wait(30s) == 0);
  ::unlink(path.c_str());
}

TEST_CASE("kvferry-launch restarts a per-rank child killed with SIGKILL", "[launch][process]") {
  // 1P1D without a workload (serving), one process per rank, restarted on failure.
  auto text = small_1p1d(free_port());
  auto cut = text.find("[workload]");
  text.erase(cut, text.find("[[node]]") - cut);
  text = replace(text, "processes = \"per-node\"",
                 "processes = \"per-rank\"\nrestart = \"on-failure\"");
  auto path = temp_cluster(text);
  auto serving = [](const std::string& l) { return l.find(" serving;") != std::string::npos; };
  child_process prefill{{launcher, "--cluster=" + path, "--node=prefill-node"}};
  REQUIRE(prefill.wait_for_line(serving, 30s));
  child_process decode{{launcher, "--cluster=" + path, "--node=decode-node"}};
  REQUIRE(decode.wait_for_line(serving, 30s));

  // "[decode-0/0] rank decode-0/0 up on 127.0.0.1:PORT (pid N)", relayed by its node.
  std::regex up_line{R"(\[decode-0/0\] rank decode-0/0 up on \S+ \(pid (\d+)\))"};
  auto pid_in = [&](const std::string& line) -> int {
    std::smatch m;
    return std::regex_search(line, m, up_line) ? std::stoi(m[1]) : 0;
  };
  int first = pid_in(line_with(decode.output(), "rank decode-0/0 up on"));
  REQUIRE(first > 0);
  REQUIRE(::kill(first, SIGKILL) == 0);

  auto restart = decode.wait_for_line(
      [](const std::string& l) { return l.find("rank decode-0/0 exited") != std::string::npos; },
      15s);
  if (!restart)
    FAIL("no restart line:\n" << decode.output());
  CHECK(*restart == "rank decode-0/0 exited (killed by signal 9); restart 1 of 10 in 200ms");
  auto again = decode.wait_for_line([&](const std::string& l) { return pid_in(l) != 0; }, 30s);
  if (!again)
    FAIL("the rank did not come up again:\n" << decode.output());
  int second = pid_in(*again);
  CHECK(second != first);

  // The node's status actor: up again in its new process, one restart, why.
  std::string seen;
  for (int tries = 0; tries < 20; ++tries) {
    child_process st{{ctl, "--cluster=" + path, "status", "--timeout=2s"}};
    st.wait(30s);
    seen = st.output();
    if (seen.find("decode-0/0  decode-0 tp0 pp0  up  pid " + std::to_string(second)) !=
            std::string::npos &&
        seen.find("restarts 1 (last: killed by signal 9)") != std::string::npos)
      break;
    std::this_thread::sleep_for(500ms);
  }
  INFO(seen);
  CHECK_THAT(seen,
             Catch::Contains("decode-0/0  decode-0 tp0 pp0  up  pid " + std::to_string(second)));
  CHECK_THAT(seen, Catch::Contains("restarts 1 (last: killed by signal 9), generation "));
  CHECK_THAT(seen, Catch::Contains("restarts 0, generation "));  // the prefill rank
  CHECK_THAT(seen, Catch::Contains("2/2 ranks up"));

  // SIGTERM stops the node and its children, within a bound.
  auto asked = std::chrono::steady_clock::now();
  ::kill(decode.pid(), SIGTERM);
  CHECK(decode.wait(20s) == 0);
  CHECK(std::chrono::steady_clock::now() - asked < 20s);
  CHECK(::kill(second, 0) != 0);  // the child went with it
  ::kill(prefill.pid(), SIGTERM);
  CHECK(prefill.wait(20s) == 0);
  ::unlink(path.c_str());
}

TEST_CASE("the status actor keeps a rank's restarts, last exit and generation", "[launch]") {
  kvferry::config cfg;
  caf::actor_system sys{cfg};
  auto status =
      sys.spawn(kvferry::launch::node_status_actor, std::string{"n"}, std::string{"per-rank"},
                std::vector<std::string>{"d/0", "d/1"}, std::string{});
  caf::scoped_actor self{sys};
  auto ask = [&] {
    kvferry::node_status out;
    self->request(status, 5s, kvferry::status_atom_v)
        .receive([&](kvferry::node_status& s) { out = std::move(s); },
                 [&](caf::error& e) { FAIL(sys.render(e)); });
    return out;
  };
  kvferry::rank_report first;
  first.instance = "d";
  first.index = 0;
  first.pid = 100;
  first.generation = 7;
  self->send(status, first);
  // Its process was killed and is being restarted.
  self->send(status, kvferry::rank_exit{"d", 0, 100, "killed by signal 9", 1, true});
  auto s = ask();
  REQUIRE(s.ranks.size() == 1);
  CHECK_FALSE(s.ranks[0].up);
  CHECK(s.ranks[0].down_reason == "process killed by signal 9, restarting");
  CHECK(s.ranks[0].restarts == 1);
  CHECK(s.ranks[0].last_exit == "killed by signal 9");
  CHECK_FALSE(s.ranks[0].given_up);
  // The new process reports: up, its generation, the count kept.
  auto rank_actor = sys.spawn([]() -> caf::behavior { return {[](int) {}}; });
  auto second = first;
  second.pid = 101;
  second.generation = 8;
  second.actor = caf::actor_cast<caf::strong_actor_ptr>(rank_actor);
  self->send(status, second);
  s = ask();
  REQUIRE(s.ranks.size() == 1);
  CHECK(s.ranks[0].up);
  CHECK(s.ranks[0].down_reason.empty());
  CHECK(s.ranks[0].last.pid == 101);
  CHECK(s.ranks[0].last.generation == 8);
  CHECK(s.ranks[0].restarts == 1);
  CHECK(s.ranks[0].last_exit == "killed by signal 9");
  // A rank whose process died before it reported, not restarted (the limit).
  self->send(status, kvferry::rank_exit{"d", 1, 200, "exit code 3", 10, false});
  s = ask();
  REQUIRE(s.ranks.size() == 2);
  CHECK(s.ranks[1].last.instance == "d");
  CHECK(s.ranks[1].last.index == 1);
  CHECK_FALSE(s.ranks[1].up);
  CHECK(s.ranks[1].given_up);
  CHECK(s.ranks[1].restarts == 10);
  CHECK(s.ranks[1].down_reason == "process exit code 3, not restarted");
  self->send_exit(rank_actor, caf::exit_reason::kill);
  self->send_exit(status, caf::exit_reason::kill);
}
