// The control plane over mutual TLS (issue 13), with real processes: a 1P1D
// cluster file with a [tls] table and certificates made by
// deploy/make-certs.sh.
//  - Every room of a verified workload succeeds, per-node and per-rank (the
//    per-rank children reach their node's status actor and decider, and the
//    decode ranks the prefill ranks, all through the processes' gateways).
//  - While it serves, strangers are refused: a plain CAF client (plain BASP
//    to a TLS port), a client whose certificate another CA signed, and a
//    client of the right CA that shows no certificate. kvferry-ctl's own
//    identity, made by make-certs.sh, reads the same status (the control).
//  - A certificate of one node cannot act as another: a process that proved
//    decode-node (its certificate's CN) at the prefill node's gateway cannot
//    register a rank with prefill-0's bootstrap nor report a rank to
//    prefill-node's status actor; one that proved prefill-node can report.
//  - Without [tls], a node that listens off loopback refuses to start unless
//    the file says insecure = true (then it says loudly that it is
//    unauthenticated).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>

#include <catch2/catch.hpp>

#include "actors/gateway/tls.hpp"
#include "actors/process/config.hpp"
#include "apps/common/child_process.hpp"
#include "messages/bootstrap.hpp"
#include "messages/handles.hpp"
#include "messages/node_status.hpp"
#include "messages/type_ids.hpp"
#include "tests/support/cluster_certs.hpp"
#include "tests/support/free_port.hpp"
#include "tests/support/workload_report.hpp"

using kvferry::apps::child_process;
using kvferry::test::check_every_room;
using kvferry::test::free_port;
using kvferry::test::openssl_missing;
using kvferry::test::temp_dir;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

const std::string launcher = KVFERRY_LAUNCH_PATH;
const std::string make_certs = std::string{KVFERRY_SOURCE_DIR} + "/deploy/make-certs.sh";

using steady = std::chrono::steady_clock;

std::string cluster(uint32_t requests, uint32_t per_second, uint32_t tp, uint16_t status_p,
                    uint16_t status_d, const std::string& tls) {
  std::ostringstream f;
  f << "transport = \"tcp\"\n\n"
    << "[deadlines]\nbootstrap = \"15s\"\ntransfer = \"20s\"\nverdict = \"5s\"\n\n"
    << "[heartbeat]\ninterval = \"200ms\"\nmisses = 10\n\n"
    << "[workload]\nrequests = " << requests
    << (per_second > 0 ? "\nrequests_per_second = " + std::to_string(per_second) : "")
    << "\nmin_tokens = 16\nmax_tokens = 96\npage_size = 16\npool_pages = 96\n"
    << "chunk_pages = 4\nconcurrency = 8\nseed = 7\nmodel = \"tiny\"\nprogress = \"5s\"\n\n"
    << tls;
  f << "[[node]]\nname = \"prefill-node\"\nhost = \"127.0.0.1\"\nstatus_port = " << status_p
    << "\n\n";
  f << "[[node]]\nname = \"decode-node\"\nhost = \"127.0.0.1\"\nstatus_port = " << status_d
    << "\n\n";
  f << "[[instance]]\nname = \"prefill-0\"\nrole = \"prefill\"\nnode = \"prefill-node\"\ntp = "
    << tp << "\npp = 1\nbootstrap_port = " << free_port() << "\n\n";
  f << "[[instance]]\nname = \"decode-0\"\nrole = \"decode\"\nnode = \"decode-node\"\ntp = " << tp
    << "\npp = 1\nprefill = \"prefill-0\"\n";
  return f.str();
}

/// Makes the cluster's certificates in dir/certs; false (and why) when it fails.
std::pair<bool, std::string> certs_for(const fs::path& file, const fs::path& dir) {
  return kvferry::test::certs_for(make_certs, file, dir);
}

/// Waits for a launcher run to end by itself: exit 0, every room Success.
void check_run_ends_well(child_process& run, uint32_t requests) {
  int rc = run.wait(90s);
  auto out = run.output();
  INFO(out.substr(out.size() > 20000 ? out.size() - 20000 : 0));
  CHECK(rc == 0);
  check_every_room(out, requests);
}

/// What a client with `files` (none: plain BASP) gets from the status actor
/// at 127.0.0.1:port: "status of NODE" or "refused: why".
std::string ask_status(uint16_t port, const kvferry::tls_files* files) {
  kvferry::config cfg;
  if (files)
    kvferry::enable_tls(cfg, *files);
  caf::actor_system sys{cfg};
  auto found = kvferry::find_published<kvferry::status_actor>(sys, "127.0.0.1", port, 5s);
  if (!found)
    return "refused: " + sys.render(found.error());
  caf::scoped_actor self{sys};
  std::string out = "no answer";
  self->request(*found, 5s, kvferry::status_atom_v)
      .receive([&](kvferry::node_status& s) { out = "status of " + s.node; },
               [&](caf::error& e) { out = "refused: " + sys.render(e); });
  return out;
}

/// What the TLS port at 127.0.0.1:port does with a client that trusts
/// `cafile` and shows no certificate (CAF cannot make one: it refuses to
/// start such an endpoint): openssl s_client's verdict. Its stdin stays open
/// 2 s: under TLS 1.3 the server's alert comes after the client's Finished,
/// and an s_client whose stdin ended may exit before it reads it.
std::string no_certificate(uint16_t port, const std::string& cafile) {
  child_process c{{"/bin/sh", "-c",
                   "(printf 'hello'; sleep 2) | timeout 10 openssl s_client -connect 127.0.0.1:" +
                       std::to_string(port) + " -CAfile " + cafile + " -verify_return_error 2>&1"}};
  c.wait(15s);
  auto& out = c.output();
  // TLS 1.3: the server's alert; 1.2: the handshake itself fails.
  for (auto why :
       {"alert certificate required", "handshake failure", "peer did not return a certificate"})
    if (out.find(why) != std::string::npos)
      return std::string{"refused: "} + why;
  return "accepted: " + out.substr(out.size() > 600 ? out.size() - 600 : 0);
}

/// What a client showing `files` gets when it registers prefill-0 tp0 with
/// the bootstrap at `boot_port`: "accepted" or "refused: why".
std::string register_rank(uint16_t boot_port, const kvferry::tls_files& files) {
  kvferry::config cfg;
  kvferry::enable_tls(cfg, files);
  caf::actor_system sys{cfg};
  auto boot = kvferry::find_published<kvferry::bootstrap_actor>(sys, "127.0.0.1", boot_port, 5s);
  if (!boot)
    return "no bootstrap: " + sys.render(boot.error());
  caf::scoped_actor self{sys};
  kvferry::rank_registration reg;
  reg.rank.instance = "prefill-0";
  std::string out = "no answer";
  self->request(*boot, 5s, reg)
      .receive([&](kvferry::registration_ack&) { out = "accepted"; },
               [&](caf::error& e) { out = "refused: " + sys.render(e); });
  return out;
}

/// The status the status actor at 127.0.0.1:`port` gives a client showing
/// `files`, after that client sent it `report` (if any); nothing if it did not
/// answer.
std::optional<kvferry::node_status> status_as(uint16_t port, const kvferry::tls_files& files,
                                              const kvferry::rank_report* report = nullptr) {
  kvferry::config cfg;
  kvferry::enable_tls(cfg, files);
  caf::actor_system sys{cfg};
  auto status = kvferry::find_published<kvferry::status_actor>(sys, "127.0.0.1", port, 5s);
  REQUIRE(status);
  caf::scoped_actor self{sys};
  if (report)
    self->send(*status, *report);
  std::optional<kvferry::node_status> out;
  self->request(*status, 5s, kvferry::status_atom_v)
      .receive([&](kvferry::node_status& s) { out = std::move(s); }, [&](caf::error&) {});
  return out;
}

/// Reports rank prefill-0/0 with pid `pid` to the status actor at `port` as
/// a client showing `files`, then reads the status back: true when the
/// report was taken (the rank's last report has that pid).
bool report_taken(uint16_t port, const kvferry::tls_files& files, int32_t pid) {
  kvferry::rank_report rep;
  rep.instance = "prefill-0";
  rep.role = "prefill";
  rep.index = 0;
  rep.pid = pid;
  bool taken = false;
  if (auto s = status_as(port, files, &rep))
    for (auto& r : s->ranks)
      taken = taken || r.last.pid == pid;
  return taken;
}

/// How many ranks the status actor at `port` lists to a client showing
/// `files`, and how many of them with a handle to reach the rank by.
std::pair<size_t, size_t> ranks_and_handles(uint16_t port, const kvferry::tls_files& files) {
  std::pair<size_t, size_t> out;
  if (auto s = status_as(port, files))
    for (auto& r : s->ranks) {
      ++out.first;
      out.second += r.last.actor ? 1 : 0;
    }
  return out;
}

}  // namespace

TEST_CASE("tls: a 1P1D cluster under [tls] serves every room, per-node and per-rank",
          "[launch][process][tls]") {
  if (openssl_missing())
    return;
  for (std::string mode : {"per-node", "per-rank"}) {
    DYNAMIC_SECTION(mode) {
      temp_dir tmp;
      auto file = tmp.path / "cluster.toml";
      const uint32_t requests = 120;
      std::ofstream{file} << cluster(requests, 0, 2, free_port(), free_port(),
                                     "[tls]\ndir = \"certs\"\n\n");
      auto [made, why] = certs_for(file, tmp.path);
      INFO(why);
      REQUIRE(made);
      child_process run{{launcher, "--cluster=" + file.string(), "--local", "--local-timeout=100",
                         "--processes=" + mode}};
      int rc = run.wait(120s);
      auto out = run.output();
      INFO(out.substr(out.size() > 20000 ? out.size() - 20000 : 0));
      CHECK(rc == 0);
      check_every_room(out, requests);
      CHECK_THAT(out, !Catch::Contains("UNAUTHENTICATED"));
    }
  }
}

TEST_CASE("tls: plain BASP, a foreign CA and no certificate are refused while the cluster serves",
          "[launch][process][tls]") {
  if (openssl_missing())
    return;
  temp_dir tmp;
  auto file = tmp.path / "cluster.toml";
  const uint32_t requests = 480, per_second = 40;  // 12 s of rooms
  auto status_d = free_port();
  std::ofstream{file} << cluster(requests, per_second, 1, free_port(), status_d,
                                 "[tls]\ndir = \"certs\"\n\n");
  auto [made, why] = certs_for(file, tmp.path);
  INFO(why);
  REQUIRE(made);
  // Another CA's certificates for the same names.
  auto other = tmp.path / "other";
  fs::create_directory(other);
  fs::permissions(other, fs::perms::owner_all);
  auto [made_other, why_other] = certs_for(file, other);
  INFO(why_other);
  REQUIRE(made_other);

  child_process run{{launcher, "--cluster=" + file.string(), "--local", "--local-timeout=100"}};
  REQUIRE(run.wait_for_line(
      [](const std::string& l) { return l.find("decode-0: decode TP") != std::string::npos; },
      60s));
  run.wait_for_line([](const std::string&) { return false; }, 1s);

  auto certs = tmp.path / "certs";
  auto own = kvferry::tls_files{
      (certs / "ctl.pem").string(), (certs / "ctl.key").string(), (certs / "ca.pem").string(), {}};
  auto foreign = kvferry::tls_files{(other / "certs/ctl.pem").string(),
                                    (other / "certs/ctl.key").string(),
                                    (other / "certs/ca.pem").string(),
                                    {}};
  // Trusts the cluster's CA, but its own certificate is another CA's.
  auto mixed = kvferry::tls_files{(other / "certs/ctl.pem").string(),
                                  (other / "certs/ctl.key").string(),
                                  (certs / "ca.pem").string(),
                                  {}};
  auto t0 = steady::now();
  auto plain = ask_status(status_d, nullptr);
  auto none_answer = no_certificate(status_d, (certs / "ca.pem").string());
  auto foreign_answer = ask_status(status_d, &foreign);
  auto mixed_answer = ask_status(status_d, &mixed);
  auto own_answer = ask_status(status_d, &own);
  auto asked_s = std::chrono::duration<double>(steady::now() - t0).count();
  std::fprintf(stderr,
               "tls: plain BASP: %s\ntls: foreign CA: %s\ntls: foreign certificate, cluster CA: "
               "%s\ntls: no certificate (openssl s_client), cluster CA: %s\ntls: ctl identity: "
               "%s\ntls: %.2f s for "
               "the five\n",
               plain.c_str(), foreign_answer.c_str(), mixed_answer.c_str(), none_answer.c_str(),
               own_answer.c_str(), asked_s);
  CHECK(plain.rfind("refused", 0) == 0);
  CHECK(foreign_answer.rfind("refused", 0) == 0);
  CHECK(mixed_answer.rfind("refused", 0) == 0);
  CHECK(none_answer.rfind("refused", 0) == 0);
  CHECK(own_answer == "status of decode-node");
  bool serving = !run.exited();
  CHECK(serving);

  check_run_ends_well(run, requests);
}

TEST_CASE("tls: a certificate of one node cannot act as another", "[launch][process][tls]") {
  if (openssl_missing())
    return;
  temp_dir tmp;
  auto file = tmp.path / "cluster.toml";
  const uint32_t requests = 320, per_second = 40;  // 8 s of rooms
  auto status_p = free_port();
  auto text = cluster(requests, per_second, 1, status_p, free_port(), "[tls]\ndir = \"certs\"\n\n");
  std::ofstream{file} << text;
  auto at = text.find("bootstrap_port = ");
  auto boot_port = static_cast<uint16_t>(std::stoul(text.substr(at + 17)));
  auto [made, why] = certs_for(file, tmp.path);
  INFO(why);
  REQUIRE(made);
  child_process run{{launcher, "--cluster=" + file.string(), "--local", "--local-timeout=100"}};
  REQUIRE(run.wait_for_line(
      [](const std::string& l) { return l.find("decode-0: decode TP") != std::string::npos; },
      60s));
  auto certs = tmp.path / "certs";
  auto as = [&](const std::string& node) { return kvferry::test::identity_in(certs, node); };
  // (Before the reports below, which replace the rank's own.) The status
  // actor hands rank handles to its own node's processes and to kvferry-ctl
  // only: another node's certificate sees the ranks' health.
  // The ranks report to the status actor after the decode line: wait until
  // ctl's certificate sees one (under load the first query came before any
  // report, seen in the flake hunt of issue 30), then ask as each.
  auto by_ctl = ranks_and_handles(status_p, as("ctl"));
  for (int i = 0; i < 200 && by_ctl.first == 0; ++i) {
    std::this_thread::sleep_for(100ms);
    by_ctl = ranks_and_handles(status_p, as("ctl"));
  }
  auto by_decode = ranks_and_handles(status_p, as("decode-node"));
  auto by_prefill = ranks_and_handles(status_p, as("prefill-node"));
  std::fprintf(stderr,
               "tls: prefill-node's status lists (ranks, handles): decode-node's certificate "
               "(%zu, %zu), ctl's (%zu, %zu), prefill-node's (%zu, %zu)\n",
               by_decode.first, by_decode.second, by_ctl.first, by_ctl.second, by_prefill.first,
               by_prefill.second);
  CHECK(by_decode.first >= 1u);
  CHECK(by_decode.second == 0u);
  CHECK(by_ctl.second >= 1u);
  CHECK(by_prefill.second >= 1u);

  auto as_decode = register_rank(boot_port, as("decode-node"));
  bool decode_report = report_taken(status_p, as("decode-node"), 4242421);
  bool prefill_report = report_taken(status_p, as("prefill-node"), 4242422);
  std::fprintf(stderr,
               "tls: decode-node's certificate registers prefill-0 tp0: %s\n"
               "tls: decode-node's certificate reports prefill-0/0 to prefill-node: %s\n"
               "tls: prefill-node's certificate reports prefill-0/0 to prefill-node: %s\n",
               as_decode.c_str(), decode_report ? "taken" : "dropped",
               prefill_report ? "taken" : "dropped");
  CHECK(as_decode.rfind("refused", 0) == 0);
  CHECK_THAT(as_decode, Catch::Contains("node \"decode-node\"'s; expected node \"prefill-node\""));
  CHECK_FALSE(decode_report);
  CHECK(prefill_report);  // the control: the check is by node, not against everyone

  check_run_ends_well(run, requests);
}

TEST_CASE("tls: without [tls], a node listening off loopback refuses to start, unless insecure",
          "[launch][process][tls]") {
  temp_dir tmp;
  auto file = tmp.path / "cluster.toml";
  auto text = cluster(1, 0, 1, free_port(), free_port(), "");
  // 0.0.0.0 for the decode node: every interface.
  auto at = text.find("host = \"127.0.0.1\"", text.find("name = \"decode-node\""));
  text.replace(at, 18, "host = \"0.0.0.0\"");
  std::ofstream{file} << text;
  {
    child_process run{{launcher, "--cluster=" + file.string(), "--node=decode-node"}};
    int rc = run.wait(30s);
    auto out = run.output();
    INFO(out);
    CHECK(rc != 0);  // refused: it did not start
    CHECK_THAT(out, Catch::Contains("decode-node") && Catch::Contains("0.0.0.0") &&
                        Catch::Contains("without [tls]") && Catch::Contains("insecure = true") &&
                        Catch::Contains("deploy/make-certs.sh"));
  }
  // Said insecure: it starts, and says loudly what it is.
  std::ofstream{file} << "insecure = true\n" << text;
  child_process run{{launcher, "--cluster=" + file.string(), "--node=decode-node"}};
  auto line = run.wait_for_line(
      [](const std::string& l) { return l.find("UNAUTHENTICATED") != std::string::npos; }, 30s);
  ::kill(run.pid(), SIGKILL);
  run.wait(10s);
  INFO(run.output());
  REQUIRE(line);
  CHECK_THAT(*line, Catch::Contains("WARNING") && Catch::Contains("decode-node") &&
                        Catch::Contains("0.0.0.0") && Catch::Contains("insecure = true"));
}
