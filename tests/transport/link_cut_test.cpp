// A data path that silently stops carrying packets (no reset, no FIN: a cable
// pulled, a switch dropping everything): the tcp receiver runs in a network
// namespace behind a veth pair, and a `tc` qdisc that drops everything
// (blackhole) on our end drops every packet after the first batch landed. The next batch must fail
// within the data connections' user timeout (tcp_options::user_timeout_ms), naming the peer,
// instead of waiting out the kernel's many minutes of retransmissions; with the path back, the
// batch after it reconnects and lands. Needs root, `ip netns` and `tc`: prints "SKIPPED: <why>"
// elsewhere.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <regex>
#include <string>

#include "apps/common/child_process.hpp"
#include "tests/support/completion_log.hpp"
#include "tests/support/trusting.hpp"
#include "transport/registry.hpp"
#include "transport/shared_memory.hpp"
#include "transport/tcp/tcp_options.hpp"

using namespace kvferry;
using namespace kvferry::transport;
using namespace std::chrono_literals;

namespace {

bool sh(const std::string& cmd) {
  return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0;
}

/// Where `ip` is (child_process execs a path, it does not search PATH).
std::string ip_path() {
  for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"})
    if (::access(p, X_OK) == 0)
      return p;
  return "ip";
}

std::string skip_reason() {
  if (::geteuid() != 0)
    return "needs root (network namespaces and tc)";
  if (!sh("ip netns list"))
    return "`ip netns` does not work here";
  if (!sh("tc qdisc show"))
    return "`tc` does not work here";
  return {};
}

/// A namespace with one end of a veth pair; the other end stays here.
struct veth_namespace {
  std::string ns, here, there;
  std::string here_ip = "10.213.7.1", there_ip = "10.213.7.2";
  bool ok = false;

  veth_namespace() {
    auto id = std::to_string(::getpid() % 100000);
    ns = "kvfcut" + id;
    here = "kvc" + id + "a";
    there = "kvc" + id + "b";
    ok = sh("ip netns add " + ns) && sh("ip link add " + here + " type veth peer name " + there) &&
         sh("ip link set " + there + " netns " + ns) &&
         sh("ip addr add " + here_ip + "/30 dev " + here) && sh("ip link set " + here + " up") &&
         sh("ip netns exec " + ns + " ip addr add " + there_ip + "/30 dev " + there) &&
         sh("ip netns exec " + ns + " ip link set " + there + " up") &&
         sh("ip netns exec " + ns + " ip link set lo up");
  }
  ~veth_namespace() {
    sh("ip link del " + here);
    sh("ip netns del " + ns);
  }
  /// Every packet leaving here is dropped (true), or none (false).
  bool drop(bool on) {
    // blackhole drops every packet; a pfifo of no packets does the same
    // where that qdisc is not built (netem is often not there either).
    return on ? sh("tc qdisc add dev " + here + " root blackhole") ||
                    sh("tc qdisc add dev " + here + " root pfifo limit 0")
              : sh("tc qdisc del dev " + here + " root");
  }
};

}  // namespace

TEST_CASE(
    "tcp: a data path that silently drops every packet fails its batch within the user "
    "timeout and the next one reconnects",
    "[transport][netns]") {
  if (auto why = skip_reason(); !why.empty()) {
    std::cout << "SKIPPED: " << why << std::endl;
    return;
  }
  veth_namespace net;
  if (!net.ok) {
    std::cout << "SKIPPED: cannot make a network namespace with a veth pair here" << std::endl;
    return;
  }
  // A qdisc that drops everything must exist here; tried once before the run.
  if (!net.drop(true) || !net.drop(false)) {
    std::cout << "SKIPPED: no tc qdisc that drops every packet (blackhole, pfifo limit 0)"
              << std::endl;
    return;
  }
  constexpr uint64_t bytes = 8 << 20;
  apps::child_process receiver{{ip_path(), "netns", "exec", net.ns, KVFERRY_TEST_PEER, "receiver",
                                "tcp", std::to_string(bytes), net.there_ip}};
  auto line = receiver.wait_for_line([](auto& l) { return l.rfind("ready ", 0) == 0; }, 30s);
  INFO(receiver.output());
  REQUIRE(line);
  std::smatch m;
  std::string kept = *line;
  REQUIRE(std::regex_search(kept, m, std::regex{R"(ready (\S+) (\d+))"}));
  std::string endpoint = m[1];
  auto remote = static_cast<region_id>(std::stoul(m[2]));

  options o;
  o.backend<tcp::tcp_options>().streams = 1;
  o.backend<tcp::tcp_options>().user_timeout_ms = 1500;
  auto sender = std::move(make_transport("tcp", kvferry::test::trusting(o))).value();
  auto mem = std::move(shared_memory::allocate(bytes)).value();
  auto local = *sender->register_region(mem.data(), mem.size());
  test::completion_log log;
  sender->set_completion_handler(log.handler());
  auto peer = *sender->connect(endpoint);

  REQUIRE(sender->post(peer, write_batch{1, {{local, 0, remote, 0, bytes}}, 0}).ok());
  auto first = log.wait(1, 30s);
  REQUIRE(first.size() == 1);
  REQUIRE(first[0].result.ok());

  REQUIRE(net.drop(true));
  auto cut_at = std::chrono::steady_clock::now();
  REQUIRE(sender->post(peer, write_batch{2, {{local, 0, remote, 0, bytes}}, 0}).ok());
  // Without the user timeout this batch would wait for the kernel to give up
  // retransmitting (about 15 minutes): the wait below would end empty.
  auto second = log.wait(2, 60s);
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - cut_at);
  REQUIRE(second.size() == 2);
  INFO(second[1].result.to_string());
  CHECK(second[1].cookie == 2);
  CHECK(second[1].result.error_code() == code::connection_lost);
  CHECK_THAT(second[1].result.message(), Catch::Contains(endpoint));
  std::cout << "silent data-path cut: batch failed after " << took.count()
            << " ms (user timeout 1500 ms): " << second[1].result.to_string() << std::endl;

  REQUIRE(net.drop(false));
  REQUIRE(sender->post(peer, write_batch{3, {{local, 0, remote, 0, bytes}}, 0}).ok());
  auto third = log.wait(3, 30s);
  REQUIRE(third.size() == 3);
  CHECK(third[2].result.ok());
  receiver.close_stdin();
}
