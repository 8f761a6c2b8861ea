// kvferry-launch as a user runs it: --local on the 1P1D example (a temp copy
// with a free bootstrap port and fewer requests), a bad file refused before
// anything starts, and a bootstrap port in use refused with its line.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "apps/common/child_process.hpp"

using namespace kvferry::apps;
using namespace std::chrono_literals;

namespace {

const std::string launcher = KVFERRY_LAUNCH_PATH;

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

/// A port nothing listens on right now.
uint16_t free_port() {
  listener l;
  return l.port;
}

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

/// The 1P1D example with its bootstrap on `port` and 40 requests.
std::string small_1p1d(uint16_t port) {
  auto text = read_file(std::string{KVFERRY_SOURCE_DIR} + "/deploy/clusters/1p1d.toml");
  text = replace(text, "bootstrap_port = 17000", "bootstrap_port = " + std::to_string(port));
  return replace(text, "requests = 200", "requests = 40");
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
