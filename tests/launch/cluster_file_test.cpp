// The cluster file parser: the examples of deploy/clusters/ parse, and every
// error names its line, the offending value and what was expected. The
// restart policy (top level, and per [[node]]) and supervision.hpp's rules:
// what is a crash, how restarts back off.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <string>

#include "actors/common/durations.hpp"
#include "apps/common/cluster_file.hpp"
#include "apps/launch/supervision.hpp"

using namespace kvferry::launch;
using kvferry::format_duration;

namespace {

const std::string good = R"(transport = "tcp"

[deadlines]
bootstrap = "20s"
transfer = "1500ms"

[heartbeat]
interval = "200ms"
misses = 3

[workload]
requests = 10
page_size = 16
pool_pages = 32
model = "tiny"

[[node]]
name = "p"
host = "127.0.0.1"

[[node]]
name = "d"
host = "127.0.0.1"

[[instance]]
name = "prefill-0"
role = "prefill"
node = "p"
tp = 4
bootstrap_port = 17000
data_port = 18000

[[instance]]
name = "decode-0"
role = "decode"
node = "d"
tp = 2
)";

/// The 1-based line of the first occurrence of `needle` in `text`.
uint32_t line_of(const std::string& text, const std::string& needle) {
  auto at = text.find(needle);
  REQUIRE(at != std::string::npos);
  return 1 + static_cast<uint32_t>(std::count(text.begin(), text.begin() + at, '\n'));
}

/// `good` with `from` replaced by `to`.
std::string with(const std::string& from, const std::string& to, std::string text = good) {
  auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

/// Parses `text`, expects exactly one error, and returns it.
std::string one_error(const std::string& text) {
  auto p = parse_cluster(text, "c.toml");
  INFO(text);
  CHECK_FALSE(p.cluster);
  REQUIRE(p.errors.size() == 1);
  return p.errors.front();
}

std::string at(uint32_t line) {
  return "c.toml:" + std::to_string(line) + ": ";
}

}  // namespace

TEST_CASE("cluster file: a good file parses into nodes and instances and deadlines", "[launch]") {
  auto p = parse_cluster(good, "c.toml");
  for (auto& e : p.errors)
    UNSCOPED_INFO(e);
  REQUIRE(p.cluster);
  auto& c = *p.cluster;
  CHECK(c.transport == "tcp");
  REQUIRE(c.nodes.size() == 2);
  REQUIRE(c.instances.size() == 2);
  CHECK(c.instances[0].role == instance_role::prefill);
  CHECK(c.instances[0].tp == 4);
  CHECK(c.instances[0].pp == 1);
  CHECK(c.instances[0].bootstrap_port == 17000);
  CHECK(c.instances[0].data_port == 18000);
  CHECK(c.instances[1].role == instance_role::decode);
  CHECK(c.instances[1].prefills == std::vector<std::string>{"prefill-0"});  // the one prefill
  CHECK(c.limits.bootstrapping == std::chrono::seconds{20});
  CHECK(c.limits.transferring == std::chrono::milliseconds{1500});
  CHECK(c.limits.heartbeat == std::chrono::milliseconds{200});
  CHECK(c.limits.heartbeat_misses == 3);
  REQUIRE(c.workload);
  CHECK(c.workload->requests == 10);
  CHECK(c.workload->model == "tiny");
}

TEST_CASE("cluster file: the examples of deploy/clusters parse", "[launch]") {
  auto file = GENERATE(as<std::string>{}, "1p1d.toml", "tp4-to-tp2.toml", "tp2-to-tp4.toml",
                       "2p4d.toml", "netns-3node.toml");
  auto p = load_cluster(std::string{KVFERRY_SOURCE_DIR} + "/deploy/clusters/" + file);
  for (auto& e : p.errors)
    UNSCOPED_INFO(e);
  CHECK(p.cluster);
}

TEST_CASE("cluster file: an unknown key is refused with its line and the keys expected",
          "[launch]") {
  auto text = with("tp = 2\n", "tp = 2\ncolour = \"red\"\n");
  auto e = one_error(text);
  CHECK_THAT(e, Catch::StartsWith(at(line_of(text, "colour"))));
  CHECK_THAT(e, Catch::Contains("unknown key \"colour\" in [[instance]]"));
  CHECK_THAT(e, Catch::Contains("expected one of name, role, node, tp"));
}

TEST_CASE("cluster file: an unknown top-level key is refused", "[launch]") {
  auto text = with("transport = \"tcp\"\n", "transport = \"tcp\"\nnodes = 3\n");
  auto e = one_error(text);
  CHECK_THAT(e, Catch::StartsWith(at(2)));
  CHECK_THAT(e, Catch::Contains("unknown key \"nodes\""));
}

TEST_CASE("cluster file: a missing instance field names the instance's line", "[launch]") {
  auto text = with("tp = 2\n", "");
  auto e = one_error(text);
  CHECK_THAT(e, Catch::StartsWith(at(line_of(text, "[[instance]]\nname = \"decode-0\""))));
  CHECK_THAT(e, Catch::Contains("missing tp in [[instance]]"));
  CHECK_THAT(e, Catch::Contains("expected an integer in 1..1024"));
}

TEST_CASE("cluster file: TP sizes that cannot map are refused with both sizes", "[launch]") {
  auto text = with("tp = 2\n", "tp = 3\n");
  auto e = one_error(text);
  CHECK_THAT(e, Catch::StartsWith(at(line_of(text, "tp = 3"))));
  CHECK_THAT(e, Catch::Contains("decode instance \"decode-0\" (TP 3 x PP 1) cannot receive from "
                                "prefill instance \"prefill-0\" (TP 4 x PP 1)"));
  CHECK_THAT(e, Catch::Contains("one TP size must divide the other"));
}

TEST_CASE("cluster file: a PP size that cannot map is refused", "[launch]") {
  auto text = with("tp = 2\n", "tp = 2\npp = 2\n");
  auto e = one_error(text);
  CHECK_THAT(e, Catch::StartsWith(at(line_of(text, "tp = 2"))));
  CHECK_THAT(e, Catch::Contains("decode PP must equal prefill PP or be 1"));
}

TEST_CASE("cluster file: a port out of range is refused with the value and the range", "[launch]") {
  auto text = with("bootstrap_port = 17000", "bootstrap_port = 70000");
  auto e = one_error(text);
  CHECK_THAT(e, Catch::StartsWith(at(line_of(text, "bootstrap_port"))));
  CHECK_THAT(e, Catch::Contains("bootstrap_port = 70000 in [[instance]] is out of range; "
                                "expected 1..65535"));
}

TEST_CASE("cluster file: two listeners on one port of one host are refused", "[launch]") {
  auto text = with("data_port = 18000", "data_port = 16998");  // ranks take 16998..17001
  auto e = one_error(text);
  CHECK_THAT(e, Catch::StartsWith(at(line_of(text, "data_port"))));
  CHECK_THAT(e, Catch::Contains("uses port 17000 on 127.0.0.1, already taken by bootstrap_port "
                                "of \"prefill-0\""));
}

TEST_CASE("cluster file: a duplicate node name is refused with both lines", "[launch]") {
  auto text = with("name = \"d\"", "name = \"p\"");
  auto p = parse_cluster(text, "c.toml");
  CHECK_FALSE(p.cluster);
  REQUIRE_FALSE(p.errors.empty());
  auto second = line_of(text, "[[node]]\nname = \"p\"\nhost = \"127.0.0.1\"\n\n[[instance]]") + 1;
  CHECK_THAT(p.errors.front(), Catch::StartsWith(at(second)));
  CHECK_THAT(p.errors.front(),
             Catch::Contains("duplicate node name \"p\"; it is already the name of the node at "
                             "line " +
                             std::to_string(line_of(text, "[[node]]"))));
}

TEST_CASE("cluster file: values of the wrong kind are refused", "[launch]") {
  SECTION("a role") {
    auto text = with("role = \"decode\"", "role = \"decoder\"");
    auto e = one_error(text);
    CHECK_THAT(e, Catch::StartsWith(at(line_of(text, "decoder"))));
    CHECK_THAT(e, Catch::Contains("role = \"decoder\" is not a role"));
  }
  SECTION("a node no [[node]] names") {
    auto text = with("node = \"d\"", "node = \"x\"");
    auto e = one_error(text);
    CHECK_THAT(e, Catch::StartsWith(at(line_of(text, "node = \"x\""))));
    CHECK_THAT(e, Catch::Contains("node = \"x\" names no [[node]]; expected one of p, d"));
  }
  SECTION("a duration") {
    auto text = with("bootstrap = \"20s\"", "bootstrap = \"20 seconds\"");
    auto e = one_error(text);
    CHECK_THAT(e, Catch::StartsWith(at(4)));
    CHECK_THAT(e, Catch::Contains("bootstrap = \"20 seconds\" in [deadlines] is not a positive "
                                  "duration"));
  }
  SECTION("a model") {
    auto text = with("model = \"tiny\"", "model = \"gpt-5\"");
    auto e = one_error(text);
    CHECK_THAT(e, Catch::StartsWith(at(line_of(text, "gpt-5"))));
    CHECK_THAT(e, Catch::Contains("expected one of llama-7b, deepseek-mla, tiny, tiny-gqa"));
  }
  SECTION("a transport that stays in one process") {
    auto e = one_error(with("transport = \"tcp\"", "transport = \"inproc\""));
    CHECK_THAT(e, Catch::StartsWith(at(1)));
    CHECK_THAT(e, Catch::Contains("transport = \"inproc\" is not a data plane that crosses "
                                  "processes"));
  }
  SECTION("a string where an integer goes") {
    auto text = with("tp = 4", "tp = \"4\"");
    auto e = one_error(text);
    CHECK_THAT(e, Catch::StartsWith(at(line_of(text, "tp = \"4\""))));
    CHECK_THAT(e, Catch::Contains("tp in [[instance]] is not an integer"));
  }
}

TEST_CASE("cluster file: staging takes enabled and sizes in MiB", "[launch]") {
  auto p = parse_cluster(good, "c.toml");
  REQUIRE(p.cluster);
  CHECK(p.cluster->staging.enabled);
  CHECK(p.cluster->staging.ring_bytes == uint64_t{32} << 20);
  auto text = good + "\n[staging]\nenabled = false\nring_mib = 8\ngather_mib = 4\n";
  p = parse_cluster(text, "c.toml");
  for (auto& e : p.errors)
    UNSCOPED_INFO(e);
  REQUIRE(p.cluster);
  CHECK_FALSE(p.cluster->staging.enabled);
  CHECK(p.cluster->staging.ring_bytes == uint64_t{8} << 20);
  CHECK(p.cluster->staging.gather_bytes == uint64_t{4} << 20);
  auto e = one_error(good + "\n[staging]\nenabled = \"yes\"\n");
  CHECK_THAT(e, Catch::Contains("enabled in [staging] is a string; expected true or false"));
  e = one_error(good + "\n[staging]\nring_mib = 0\n");
  CHECK_THAT(e, Catch::Contains("ring_mib = 0 in [staging] is out of range; expected 1..65536"));
  e = one_error(good + "\n[staging]\nring = 8\n");
  CHECK_THAT(e, Catch::Contains("unknown key \"ring\" in [staging]"));
}

TEST_CASE("cluster file: a decode instance may check KV checksums", "[launch][checksum]") {
  auto p = parse_cluster(good, "c.toml");
  REQUIRE(p.cluster);
  CHECK(p.cluster->instances[1].checksum == kvferry::kv_checksum::off);
  auto text = good + "checksum = \"xxh3\"\n";  // the last [[instance]]: decode-0
  p = parse_cluster(text, "c.toml");
  for (auto& e : p.errors)
    UNSCOPED_INFO(e);
  REQUIRE(p.cluster);
  CHECK(p.cluster->instances[1].checksum == kvferry::kv_checksum::xxh3);
  text = good + "checksum = \"crc64\"\n";
  auto e = one_error(text);
  CHECK_THAT(e, Catch::StartsWith(at(line_of(text, "crc64"))));
  CHECK_THAT(e, Catch::Contains("checksum = \"crc64\" is not a checksum; expected \"off\" or "
                                "\"xxh3\""));
  text = with("data_port = 18000", "data_port = 18000\nchecksum = \"xxh3\"");
  e = one_error(text);
  CHECK_THAT(e, Catch::Contains("checksum is a key of decode instances"));
}

TEST_CASE("cluster file: a TP size that does not split the model's heads is refused", "[launch]") {
  // tiny: 8 kv heads. Prefill TP 12 and decode TP 6 map onto each other,
  // but neither splits 8 heads evenly.
  auto text = with("tp = 2\n", "tp = 6\n", with("tp = 4", "tp = 12"));
  auto p = parse_cluster(text, "c.toml");
  REQUIRE(p.errors.size() == 2);
  CHECK_THAT(p.errors[0], Catch::StartsWith(at(line_of(text, "tp = 12"))));
  CHECK_THAT(p.errors[0], Catch::Contains("tp = 12 of instance \"prefill-0\" does not split the "
                                          "8 kv heads of model \"tiny\""));
  CHECK_THAT(p.errors[1], Catch::StartsWith(at(line_of(text, "tp = 6"))));
}

TEST_CASE("cluster file: text that is not TOML is refused with its line", "[launch]") {
  auto text = with("misses = 3", "misses = = 3");
  auto e = one_error(text);
  CHECK_THAT(e, Catch::StartsWith(at(line_of(text, "misses"))));
  CHECK_THAT(e, Catch::Contains("not valid TOML"));
}

TEST_CASE("cluster file: durations take ns us ms s and min", "[launch]") {
  CHECK(parse_duration("250ns") == std::chrono::nanoseconds{250});
  CHECK(parse_duration("3us") == std::chrono::microseconds{3});
  CHECK(parse_duration("200ms") == std::chrono::milliseconds{200});
  CHECK(parse_duration("1.5s") == std::chrono::milliseconds{1500});
  CHECK(parse_duration("2min") == std::chrono::minutes{2});
  CHECK_FALSE(parse_duration("20"));
  CHECK_FALSE(parse_duration("s"));
  CHECK_FALSE(parse_duration("20 s"));
}

TEST_CASE("cluster file: process modes come from the file and each node", "[launch]") {
  auto text = with("transport = \"tcp\"\n", "transport = \"tcp\"\nprocesses = \"per-rank\"\n");
  text =
      with("name = \"d\"\n", "name = \"d\"\nprocesses = \"per-node\"\nstatus_port = 17100\n", text);
  auto p = parse_cluster(text, "c.toml");
  for (auto& e : p.errors)
    UNSCOPED_INFO(e);
  REQUIRE(p.cluster);
  auto& c = *p.cluster;
  CHECK(c.processes_of(*c.find_node("p")) == process_mode::per_rank);
  CHECK(c.processes_of(*c.find_node("d")) == process_mode::per_node);
  CHECK(c.find_node("d")->status_port == 17100);
}

TEST_CASE("cluster file: the keys of the launcher options are refused with their message",
          "[launch]") {
  SECTION("a process mode") {
    auto text = with("name = \"p\"\n", "name = \"p\"\nprocesses = \"per-gpu\"\n");
    auto e = one_error(text);
    CHECK_THAT(e, Catch::StartsWith(at(line_of(text, "per-gpu"))));
    CHECK_THAT(e, Catch::Contains("processes = \"per-gpu\" in [[node]] is not a process mode; "
                                  "expected \"per-node\""));
  }
  SECTION("a status port taken by a bootstrap on the same host") {
    auto text = with("name = \"p\"\n", "name = \"p\"\nstatus_port = 17000\n");
    auto e = one_error(text);
    CHECK_THAT(e, Catch::StartsWith(at(line_of(text, "bootstrap_port = 17000"))));
    CHECK_THAT(e, Catch::Contains("already taken by status_port of node \"p\""));
  }
  SECTION("an unknown node key lists the node keys") {
    auto e = one_error(with("name = \"p\"\n", "name = \"p\"\ngpus = 8\n"));
    CHECK_THAT(e,
               Catch::Contains("expected one of name, host, status_port, metrics_port, processes"));
  }
  SECTION("a metrics port taken by a status port on the same host") {
    auto text = with("name = \"p\"\n", "name = \"p\"\nstatus_port = 17100\nmetrics_port = 17100\n");
    auto e = one_error(text);
    CHECK_THAT(e, Catch::StartsWith(at(line_of(text, "metrics_port = 17100"))));
    CHECK_THAT(e, Catch::Contains("metrics_port of node \"p\" uses port 17100"));
    CHECK_THAT(e, Catch::Contains("already taken by status_port of node \"p\""));
  }
  SECTION("a metrics port out of range") {
    auto text = with("name = \"p\"\n", "name = \"p\"\nmetrics_port = 70000\n");
    auto e = one_error(text);
    CHECK_THAT(e, Catch::StartsWith(at(line_of(text, "metrics_port = 70000"))));
    CHECK_THAT(e, Catch::Contains("metrics_port"));
  }
  SECTION("a request rate that is not positive") {
    auto text = with("requests = 10\n", "requests = 10\nrequests_per_second = 0\n");
    auto e = one_error(text);
    CHECK_THAT(e, Catch::StartsWith(at(line_of(text, "requests_per_second"))));
    CHECK_THAT(e, Catch::Contains("expected a number above 0"));
  }
  SECTION("a progress period that is not a duration") {
    auto e = one_error(with("requests = 10\n", "requests = 10\nprogress = \"often\"\n"));
    CHECK_THAT(e, Catch::Contains("progress = \"often\" in [workload] is not a positive "
                                  "duration"));
  }
  SECTION("a prefill list that names a decode instance") {
    auto text = with("tp = 2\n", "tp = 2\nprefill = [\"prefill-0\", \"decode-0\"]\n");
    auto e = one_error(text);
    CHECK_THAT(e, Catch::Contains("prefill = \"decode-0\" of decode instance \"decode-0\" names "
                                  "no prefill instance"));
  }
  SECTION("a prefill that is neither a name nor a list") {
    auto e = one_error(with("tp = 2\n", "tp = 2\nprefill = 3\n"));
    CHECK_THAT(e, Catch::Contains("expected a prefill instance's name or a non-empty list"));
  }
  SECTION("a prefill instance no decode instance receives from") {
    auto text = good + R"(
[[instance]]
name = "prefill-1"
role = "prefill"
node = "p"
tp = 4
bootstrap_port = 17001
)";
    text = with("tp = 2\n", "tp = 2\nprefill = \"prefill-0\"\n", text);
    auto e = one_error(text);
    CHECK_THAT(e, Catch::StartsWith(at(line_of(text, "name = \"prefill-1\"") - 1)));
    CHECK_THAT(e, Catch::Contains("prefill instance \"prefill-1\" gets none of the 10 rooms"));
  }
}

TEST_CASE("cluster file: 2P4D routes each room to one decode and one prefill instance",
          "[launch]") {
  auto p = load_cluster(std::string{KVFERRY_SOURCE_DIR} + "/deploy/clusters/2p4d.toml");
  REQUIRE(p.cluster);
  auto& c = *p.cluster;
  REQUIRE(c.workload);
  std::map<std::string, size_t> rooms;
  for (auto& i : c.instances)
    rooms[i.name] = c.rooms_of(i).size();
  CHECK(rooms["decode-0"] == 60);
  CHECK(rooms["decode-3"] == 60);
  CHECK(rooms["prefill-0"] == 120);
  CHECK(rooms["prefill-1"] == 120);
  for (uint64_t r = 1; r <= c.workload->requests; ++r) {
    auto* d = c.decode_of(r);
    auto* s = c.source_of(r);
    REQUIRE(d);
    REQUIRE(s);
    // The room's prefill instance is one its decode instance receives from.
    CHECK(std::count(d->prefills.begin(), d->prefills.end(), s->name) == 1);
  }
  CHECK(c.decode_of(1)->name == "decode-0");
  CHECK(c.source_of(1)->name == "prefill-0");
  CHECK(c.source_of(5)->name == "prefill-1");  // decode-0's second room
}

TEST_CASE("cluster file: the restart policy is never unless the file says otherwise", "[launch]") {
  auto p = parse_cluster(good, "c.toml");
  REQUIRE(p.cluster);
  for (auto& n : p.cluster->nodes) {
    CHECK(n.restart.mode == restart_mode::never);
    CHECK(n.restart.backoff == std::chrono::milliseconds{200});
    CHECK(n.restart.backoff_max == std::chrono::seconds{5});
    CHECK(n.restart.limit == 10);
    CHECK_FALSE(n.restart.on());
  }
  CHECK(to_string(p.cluster->restart) == "never");
}

TEST_CASE("cluster file: restart keys at the top and in a [[node]] over them", "[launch]") {
  auto text = with("transport = \"tcp\"\n",
                   "transport = \"tcp\"\nrestart = \"on-failure\"\nrestart_backoff = \"100ms\"\n"
                   "restart_limit = 4\n");
  text = with(
      "name = \"d\"\n",
      "name = \"d\"\nrestart = \"never\"\nrestart_backoff_max = \"2s\"\nrestart_limit = 3\n", text);
  auto p = parse_cluster(text, "c.toml");
  for (auto& e : p.errors)
    UNSCOPED_INFO(e);
  REQUIRE(p.cluster);
  auto& c = *p.cluster;
  auto& top = c.find_node("p")->restart;  // the file's policy as it is
  CHECK(top.mode == restart_mode::on_failure);
  CHECK(top.backoff == std::chrono::milliseconds{100});
  CHECK(top.backoff_max == std::chrono::seconds{5});
  CHECK(top.limit == 4);
  CHECK(top == c.restart);
  auto& d = c.find_node("d")->restart;  // its own keys over the file's
  CHECK(d.mode == restart_mode::never);
  CHECK(d.backoff == std::chrono::milliseconds{100});
  CHECK(d.backoff_max == std::chrono::seconds{2});
  CHECK(d.limit == 3);
  CHECK(to_string(top) == "on-failure, 100ms doubling up to 5s, at most 4 restarts");
}

TEST_CASE("cluster file: the restart delay doubles up to its maximum", "[launch]") {
  restart_policy p;
  p.mode = restart_mode::on_failure;
  CHECK(p.delay(1) == std::chrono::milliseconds{200});
  CHECK(p.delay(2) == std::chrono::milliseconds{400});
  CHECK(p.delay(4) == std::chrono::milliseconds{1600});
  CHECK(p.delay(5) == std::chrono::milliseconds{3200});
  CHECK(p.delay(6) == std::chrono::seconds{5});
  CHECK(p.delay(1000) == std::chrono::seconds{5});
  CHECK(format_duration(p.delay(4)) == "1.6s");
  CHECK(format_duration(std::chrono::milliseconds{200}) == "200ms");
  CHECK(format_duration(std::chrono::seconds{5}) == "5s");
  CHECK(format_duration(std::chrono::minutes{2}) == "2min");
  CHECK(format_duration(std::chrono::microseconds{1500}) == "1.5ms");
  CHECK(format_duration(std::chrono::nanoseconds{250}) == "250ns");
  for (auto* d : {"200ms", "1.6s", "5s", "2min", "750us", "1.25s"})
    CHECK(format_duration(*parse_duration(d)) == d);
}

TEST_CASE("cluster file: bad restart values are refused with their line", "[launch]") {
  SECTION("a policy that is not one") {
    auto text = with("name = \"p\"\n", "name = \"p\"\nrestart = \"always\"\n");
    auto e = one_error(text);
    CHECK_THAT(e, Catch::StartsWith(at(line_of(text, "always"))));
    CHECK_THAT(e, Catch::Contains("restart = \"always\" in [[node]] is not a restart policy; "
                                  "expected \"never\" or \"on-failure\""));
  }
  SECTION("a policy that is not a string") {
    auto text = with("transport = \"tcp\"\n", "transport = \"tcp\"\nrestart = true\n");
    auto e = one_error(text);
    CHECK_THAT(e, Catch::StartsWith(at(2)));
    CHECK_THAT(e, Catch::Contains("restart in the file is a boolean; expected a string"));
  }
  SECTION("a backoff that is not a duration") {
    auto text = with("name = \"d\"\n", "name = \"d\"\nrestart_backoff = \"soon\"\n");
    auto e = one_error(text);
    CHECK_THAT(e, Catch::StartsWith(at(line_of(text, "soon"))));
    CHECK_THAT(e, Catch::Contains("restart_backoff = \"soon\" in [[node]] is not a positive "
                                  "duration"));
  }
  SECTION("a limit out of range") {
    auto text = with("transport = \"tcp\"\n", "transport = \"tcp\"\nrestart_limit = 0\n");
    auto e = one_error(text);
    CHECK_THAT(e, Catch::StartsWith(at(2)));
    CHECK_THAT(e, Catch::Contains("restart_limit = 0 in the file is out of range; expected "
                                  "1..100000"));
  }
  SECTION("a limit that is not an integer") {
    auto text = with("name = \"p\"\n", "name = \"p\"\nrestart_limit = \"ten\"\n");
    auto e = one_error(text);
    CHECK_THAT(e, Catch::StartsWith(at(line_of(text, "ten"))));
    CHECK_THAT(e, Catch::Contains("restart_limit in [[node]] is not an integer"));
  }
  SECTION("a maximum below the first delay") {
    auto text = with("transport = \"tcp\"\n",
                     "transport = \"tcp\"\nrestart_backoff = \"1s\"\nrestart_backoff_max = "
                     "\"500ms\"\n");
    auto e = one_error(text);
    CHECK_THAT(e, Catch::StartsWith(at(line_of(text, "500ms"))));
    CHECK_THAT(e, Catch::Contains("restart_backoff_max = \"500ms\" in the file is below "
                                  "restart_backoff (1s)"));
  }
  SECTION("a node's first delay above the file's maximum") {
    auto text = with("name = \"p\"\n", "name = \"p\"\nrestart_backoff = \"10s\"\n");
    auto e = one_error(text);
    CHECK_THAT(e, Catch::StartsWith(at(line_of(text, "10s"))));
    CHECK_THAT(e, Catch::Contains("restart_backoff = \"10s\" in [[node]] is above "
                                  "restart_backoff_max (5s)"));
  }
  SECTION("an unknown node key lists the restart keys") {
    auto e = one_error(with("name = \"p\"\n", "name = \"p\"\nrestarts = 3\n"));
    CHECK_THAT(e, Catch::Contains("restart, restart_backoff, restart_backoff_max, restart_limit"));
  }
}

TEST_CASE("supervision: a crash is told from a finished workload, and restarts back off",
          "[launch]") {
  CHECK(exit_reason(128 + 9) == "killed by signal 9");
  CHECK(exit_reason(3) == "exit code 3");
  CHECK(crashed(128 + 9, false));
  CHECK(crashed(1, false));        // before the workload finished: a rank that did not start
  CHECK_FALSE(crashed(1, true));   // after it: some rooms failed, a result
  CHECK_FALSE(crashed(0, false));  // a clean stop (SIGTERM to a serving process)
  CHECK_FALSE(crashed(2, false));  // a refused file: a restart would not change it
  CHECK_FALSE(crashed(128 + 11, true));
  CHECK(done_line("rank decode-0/1") == "rank decode-0/1 workload done");

  restart_tracker t;
  CHECK_FALSE(t.next());  // never
  t.policy.mode = restart_mode::on_failure;
  t.policy.limit = 3;
  auto now = t.started;
  CHECK(t.next(now) == std::chrono::milliseconds{200});
  CHECK(t.what(std::chrono::milliseconds{200}) == "restart 1 of 3 in 200ms");
  t.started = now;
  CHECK(t.next(now + std::chrono::seconds{1}) == std::chrono::milliseconds{400});
  // Up longer than the longest delay: the next one starts from the first delay.
  t.started = now;
  CHECK(t.next(now + std::chrono::seconds{6}) == std::chrono::milliseconds{200});
  CHECK(t.restarts == 3);
  CHECK_FALSE(t.next(now));  // the limit
}

TEST_CASE("cluster file: sizes beyond the caps are refused naming the value and the cap",
          "[launch]") {
  SECTION("a file above 1 MiB") {
    auto text = good + "# " + std::string(max_cluster_file_bytes, 'x') + "\n";
    auto e = one_error(text);
    CHECK_THAT(e, Catch::StartsWith("c.toml: " + std::to_string(text.size()) + " bytes read"));
    CHECK_THAT(e, Catch::Contains("expected at most 1048576 bytes (1 MiB)"));
  }
  SECTION("an endless file is not read whole") {
    auto p = load_cluster("/dev/zero");
    CHECK_FALSE(p.cluster);
    REQUIRE(p.errors.size() == 1);
    CHECK_THAT(p.errors.front(), Catch::StartsWith("/dev/zero: 1048577 bytes read"));
  }
  SECTION("a TP size above the cap") {
    auto text = with("tp = 2\n", "tp = 2048\n");
    auto e = one_error(text);
    CHECK_THAT(e, Catch::StartsWith(at(line_of(text, "tp = 2048"))));
    CHECK_THAT(e, Catch::Contains("tp = 2048 in [[instance]] is out of range; expected 1..1024"));
  }
  SECTION("a PP size above the cap") {
    auto text = with("tp = 2\n", "tp = 2\npp = 4096\n");
    auto e = one_error(text);
    CHECK_THAT(e, Catch::StartsWith(at(line_of(text, "pp = 4096"))));
    CHECK_THAT(e, Catch::Contains("pp = 4096 in [[instance]] is out of range; expected 1..1024"));
  }
  SECTION("TP x PP above the ranks of one instance") {
    auto text = with("tp = 2\n", "tp = 128\npp = 64\n");
    auto e = one_error(text);
    CHECK_THAT(e, Catch::StartsWith(at(line_of(text, "tp = 128"))));
    CHECK_THAT(e, Catch::Contains("tp = 128 x pp = 64 makes 8192 ranks; expected at most 4096 "
                                  "ranks per instance"));
  }
  SECTION("more ranks in the cluster than the cap") {
    std::string text = good;
    for (int i = 0; i < 16; ++i)  // 6 ranks, then 16 x 4096
      text += "\n[[instance]]\nname = \"big-" + std::to_string(i) +
              "\"\nrole = \"decode\"\nnode = \"d\"\ntp = 64\npp = 64\n";
    auto e = one_error(text);
    CHECK_THAT(e, Catch::StartsWith(at(line_of(text, "name = \"big-15\"") + 3)));
    CHECK_THAT(e, Catch::Contains("brings the cluster to " + std::to_string(6 + 16 * 4096) +
                                  " ranks; expected at most 65536"));
  }
  SECTION("more [[node]] tables than the cap") {
    std::string text = good;
    for (size_t i = 0; i < max_nodes - 1; ++i)
      text += "\n[[node]]\nname = \"n" + std::to_string(i) + "\"\nhost = \"127.0.0.1\"\n";
    auto e = one_error(text);
    CHECK_THAT(e, Catch::StartsWith(at(line_of(text, "name = \"n1021\"") + 3)));
    CHECK_THAT(e, Catch::Contains("1025 [[node]] tables; expected at most 1024"));
  }
  SECTION("a decode instance naming more prefills than the cap") {
    std::string names;
    for (size_t i = 0; i <= max_prefills_per_decode; ++i)
      names += "\"prefill-0\", ";
    auto text = with("tp = 2\n", "tp = 2\nprefill = [" + names + "]\n");
    auto e = one_error(text);
    CHECK_THAT(e, Catch::StartsWith(at(line_of(text, "prefill = ["))));
    CHECK_THAT(e,
               Catch::Contains("prefill in [[instance]] lists 1025 names; expected at most 1024"));
  }
  SECTION("a duration past what nanoseconds hold") {
    CHECK_FALSE(parse_duration("999999999999999999min"));
    CHECK(parse_duration("100000min"));
  }
}

TEST_CASE("cluster file: taking part in the workload is decided without walking every room",
          "[launch]") {
  SECTION("2^31 - 1 requests parse at once") {
    auto p = parse_cluster(with("requests = 10", "requests = 2147483647"), "c.toml");
    for (auto& e : p.errors)
      UNSCOPED_INFO(e);
    CHECK(p.cluster);
  }
  SECTION("a prefill named second by the second decode instance first gets room 4") {
    auto text = with("tp = 2\n", "tp = 2\nprefill = \"prefill-0\"\n") + R"(
[[instance]]
name = "prefill-1"
role = "prefill"
node = "p"
tp = 4
bootstrap_port = 17001

[[instance]]
name = "decode-1"
role = "decode"
node = "d"
tp = 2
prefill = ["prefill-0", "prefill-1"]
)";
    auto p = parse_cluster(with("requests = 10", "requests = 4", text), "c.toml");
    REQUIRE(p.cluster);
    for (auto& i : p.cluster->instances)
      CHECK_FALSE(p.cluster->rooms_of(i).empty());
    auto e = one_error(with("requests = 10", "requests = 3", text));
    CHECK_THAT(e, Catch::Contains("prefill instance \"prefill-1\" gets none of the 3 rooms"));
  }
}

TEST_CASE("cluster file: dp = N splits an instance into its DP groups", "[launch][dp]") {
  // prefill TP 4 DP 2 (groups of 2) -> decode TP 2 DP 2 (groups of 1).
  auto text = with("tp = 2\n", "tp = 2\ndp = 2\n", with("tp = 4\n", "tp = 4\ndp = 2\n"));
  auto p = parse_cluster(text, "c.toml");
  for (auto& e : p.errors)
    UNSCOPED_INFO(e);
  REQUIRE(p.cluster);
  auto& c = *p.cluster;
  REQUIRE(c.instances.size() == 4);
  auto& p0 = c.instances[0];
  auto& p1 = c.instances[1];
  CHECK(p0.name == "prefill-0/dp0");
  CHECK(p1.name == "prefill-0/dp1");
  CHECK(p0.tp == 2);
  CHECK(p0.bootstrap_port == 17000);
  CHECK(p1.bootstrap_port == 17001);
  CHECK(p0.data_port == 18000);
  CHECK(p1.data_port == 18002);  // after group 0's two ranks
  CHECK(p0.dp_group);
  auto& d0 = c.instances[2];
  CHECK(d0.name == "decode-0/dp0");
  CHECK(d0.tp == 1);
  // The one prefill instance, implied, is every group of it.
  CHECK(d0.prefills == std::vector<std::string>{"prefill-0/dp0", "prefill-0/dp1"});
  // Every room goes to one decode group and one prefill group, and every
  // group takes rooms.
  std::map<std::string, size_t> rooms;
  for (auto& i : c.instances)
    rooms[i.name] = c.rooms_of(i).size();
  for (auto& i : c.instances)
    CHECK(rooms[i.name] > 0);
  for (uint64_t r = 1; r <= c.workload->requests; ++r)
    CHECK(std::count(c.decode_of(r)->prefills.begin(), c.decode_of(r)->prefills.end(),
                     c.source_of(r)->name) == 1);
}

TEST_CASE("cluster file: a dp that does not divide tp, or groups that cannot pair, are refused",
          "[launch][dp]") {
  auto split = with("tp = 4\n", "tp = 4\ndp = 3\n");
  auto e = one_error(split);
  CHECK_THAT(e, Catch::StartsWith(at(line_of(split, "dp = 3"))));
  CHECK_THAT(e, Catch::Contains("instance \"prefill-0\": tp = 4, dp = 3"));
  CHECK_THAT(e, Catch::Contains("expected a dp that divides tp"));
  // prefill groups of 4 / 4 = 1 with decode TP 2: fine; prefill TP 4 DP 4
  // with decode TP 3 is refused by the pairing of groups, naming them.
  auto pair = with("tp = 2\n", "tp = 3\n", with("tp = 4\n", "tp = 4\ndp = 2\n"));
  auto p = parse_cluster(pair, "c.toml");
  REQUIRE_FALSE(p.cluster);
  REQUIRE_FALSE(p.errors.empty());
  CHECK_THAT(p.errors.front(), Catch::Contains("prefill instance \"prefill-0/dp0\" (TP 2 x PP 1)"));
  auto zero = with("tp = 4\n", "tp = 4\ndp = 0\n");
  CHECK_THAT(one_error(zero), Catch::Contains("dp = 0 in [[instance]] is out of range"));
  // A group's name taken by an instance of the file.
  auto taken = with("tp = 4\n", "tp = 4\ndp = 2\n") +
               "\n[[instance]]\nname = \"prefill-0/dp1\"\nrole = \"prefill\"\nnode = \"p\"\ntp = "
               "2\nbootstrap_port = 17100\n";
  auto p2 = parse_cluster(taken, "c.toml");
  REQUIRE_FALSE(p2.cluster);
  REQUIRE_FALSE(p2.errors.empty());
  CHECK_THAT(p2.errors.front(), Catch::Contains("instance name \"prefill-0/dp1\" is taken twice"));
  auto high = with("bootstrap_port = 17000", "bootstrap_port = 65535",
                   with("tp = 4\n", "tp = 4\ndp = 2\n"));
  CHECK_THAT(one_error(high), Catch::Contains("runs past port 65535"));
}
