// The BASP bombs of hostile_test (e) against a cluster under [tls], thrown by
// an insider (issue 29): the attacker holds a certificate of the cluster's
// CA (decode-node's), completes the TLS handshake on every CAF port of both
// node processes of a serving 1P1D run, and sends inside it the 32-byte
// headers declaring 1-4 GiB (four operations), drips and a crowd of 1,000.
// A certificate lets a peer past TLS, not past the caps: every connection is
// closed, neither node's RSS moves by 64 MiB, every room of the run succeeds,
// verified byte for byte, and the launcher exits 0 by itself.
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <catch2/catch.hpp>

#include "apps/common/child_process.hpp"
#include "tests/launch/basp_bombs.hpp"
#include "tests/support/cluster_certs.hpp"
#include "tests/support/free_port.hpp"
#include "tests/support/process_probe.hpp"
#include "tests/support/raw_tcp.hpp"
#include "tests/support/workload_report.hpp"

using kvferry::apps::child_process;
using namespace kvferry::test;
using namespace std::chrono_literals;

namespace {

const std::string launcher = KVFERRY_LAUNCH_PATH;
const std::string make_certs = std::string{KVFERRY_SOURCE_DIR} + "/deploy/make-certs.sh";

std::string cluster(uint32_t requests, uint32_t per_second) {
  std::ostringstream f;
  f << "transport = \"tcp\"\nprocesses = \"per-node\"\n\n"
    << "[deadlines]\nbootstrap = \"10s\"\ntransfer = \"20s\"\nverdict = \"5s\"\n\n"
    << "[heartbeat]\ninterval = \"200ms\"\nmisses = 5\n\n"
    << "[workload]\nrequests = " << requests << "\nrequests_per_second = " << per_second
    << "\nmin_tokens = 16\nmax_tokens = 96\npage_size = 16\npool_pages = 96\n"
    << "chunk_pages = 4\nconcurrency = 8\nseed = 42\nmodel = \"tiny\"\nprogress = \"5s\"\n\n"
    << "[tls]\ndir = \"certs\"\n\n";
  for (auto n : {"prefill-node", "decode-node"})
    f << "[[node]]\nname = \"" << n << "\"\nhost = \"127.0.0.1\"\nstatus_port = " << free_port()
      << "\n\n";
  f << "[[instance]]\nname = \"prefill-0\"\nrole = \"prefill\"\nnode = \"prefill-node\"\ntp = 1\n"
    << "pp = 1\nbootstrap_port = " << free_port() << "\n\n";
  f << "[[instance]]\nname = \"decode-0\"\nrole = \"decode\"\nnode = \"decode-node\"\ntp = 1\n"
    << "pp = 1\nprefill = \"prefill-0\"\n";
  return f.str();
}

/// The rooms of a run: KVFERRY_HOSTILE_REQUESTS (the attack ran
/// 4,800), else `otherwise`.
uint32_t requests_or(uint32_t otherwise) {
  auto* v = std::getenv("KVFERRY_HOSTILE_REQUESTS");
  return v ? static_cast<uint32_t>(std::strtoul(v, nullptr, 10)) : otherwise;
}

}  // namespace

TEST_CASE(
    "hostile insider under [tls]: a holder of a cluster certificate bombs every CAF port, and a "
    "verified 1P1D run changes nothing",
    "[launch][process][hostile][tls]") {
  if (openssl_missing())
    return;
  ::signal(SIGPIPE, SIG_IGN);
  const uint32_t requests = requests_or(1600), per_second = 80;  // 20 s of rooms
  temp_dir tmp;
  auto file = tmp.path / "cluster.toml";
  std::ofstream{file} << cluster(requests, per_second);
  auto [made, why] = certs_for(make_certs, file, tmp.path);
  INFO(why);
  REQUIRE(made);
  auto started = std::chrono::steady_clock::now();
  child_process run{{launcher, "--cluster=" + file.string(), "--local",
                     "--local-timeout=" + std::to_string(requests / per_second + 50)}};
  REQUIRE(run.wait_for_line(
      [](const std::string& l) { return l.find("decode-0: decode TP") != std::string::npos; },
      60s));
  std::vector<int> d, p;
  for (auto until = std::chrono::steady_clock::now() + 45s;
       std::chrono::steady_clock::now() < until;) {
    d = pids_with("--cluster=" + file.string() + " --node=decode-node");
    p = pids_with("--cluster=" + file.string() + " --node=prefill-node");
    if (d.size() == 1 && p.size() == 1)
      break;
    run.wait_for_line([](const std::string&) { return false; }, 200ms);
  }
  REQUIRE(d.size() == 1);
  REQUIRE(p.size() == 1);
  run.wait_for_line([](const std::string&) { return false; }, 1500ms);  // the first rooms
  bomb_target decode{d.front(), listening_ports(d.front())};
  bomb_target prefill{p.front(), listening_ports(p.front())};

  bomb_findings found;
  bool attacked = false;
  std::thread attacker{[&] {
    found = bomb_caf_ports(decode, prefill, identity_in(tmp.path / "certs", "decode-node"));
    attacked = true;
  }};
  // Read the launcher's output meanwhile (a child whose pipe is full blocks).
  for (auto until = std::chrono::steady_clock::now() + 60s;
       !attacked && std::chrono::steady_clock::now() < until;)
    run.wait_for_line([](const std::string&) { return false; }, 200ms);
  bool running_after_attacks = !run.exited();
  attacker.join();  // every step of it is bounded

  int rc = run.wait(std::chrono::seconds{requests / per_second + 60});
  auto out = run.output();
  auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  INFO(out.substr(out.size() > 20000 ? out.size() - 20000 : 0));
  std::fprintf(stderr, "hostile tls: %u rooms, run ended at +%.1f s\n", requests, seconds);
  CHECK(running_after_attacks);  // the bombs hit a serving cluster
  check_bombs_cost_nothing(found);
  REQUIRE(rc == 0);
  check_every_room(out, requests);
  CHECK_THAT(out, Catch::Contains("prefill-0 prefill: " + std::to_string(requests) +
                                  " requests on 1 rank, " + std::to_string(requests) + " Success"));
}
