// deploy/: the systemd unit parses as INI and runs the launcher on the node
// of its instance name; the Kubernetes manifests parse as YAML (yaml-cpp),
// their cluster file (the ConfigMap) parses with the launcher's own parser,
// and each StatefulSet runs the launcher for a node of that file, opens the
// node's ports and probes readiness with kvferry-ctl status --node. Restarts:
// the unit restarts on failure with the timing of the cluster file's restart
// defaults; the pods restart Always (the kubelet's CrashLoopBackOff) and their
// cluster file restarts the per-rank children on failure.
#include <catch2/catch.hpp>

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "apps/launch/cluster_file.hpp"

using namespace kvferry::launch;

namespace {

const std::string deploy = std::string{KVFERRY_SOURCE_DIR} + "/deploy";

/// section → key → values (a key may repeat, as ExecStartPre does).
using ini = std::map<std::string, std::multimap<std::string, std::string>>;

/// A strict reader of systemd's INI dialect: comments (# ;), [Section],
/// Key=Value; anything else is an error naming the line.
ini parse_ini(const std::string& path) {
  std::ifstream in{path};
  REQUIRE(in);
  ini out;
  std::string section, line;
  for (int n = 1; std::getline(in, line); ++n) {
    auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#' || line[first] == ';')
      continue;
    INFO(path << ":" << n << ": " << line);
    if (line[first] == '[') {
      REQUIRE(line.back() == ']');
      section = line.substr(first + 1, line.size() - first - 2);
      out[section];
      continue;
    }
    auto eq = line.find('=');
    REQUIRE(eq != std::string::npos);
    REQUIRE_FALSE(section.empty());
    auto key = line.substr(first, eq - first);
    key.erase(key.find_last_not_of(" \t") + 1);
    REQUIRE_FALSE(key.empty());
    out[section].emplace(key, line.substr(eq + 1));
  }
  return out;
}

std::string one(const ini& f, const std::string& section, const std::string& key) {
  INFO("[" << section << "] " << key);
  REQUIRE(f.count(section));
  auto& s = f.at(section);
  REQUIRE(s.count(key) == 1);
  return s.find(key)->second;
}

std::vector<YAML::Node> load_all(const std::string& path) {
  INFO(path);
  std::vector<YAML::Node> docs;
  REQUIRE_NOTHROW(docs = YAML::LoadAllFromFile(path));
  return docs;
}

}  // namespace

TEST_CASE("deploy: the systemd unit template parses and runs the launcher on its node",
          "[launch][deploy]") {
  auto unit = parse_ini(deploy + "/systemd/kvferry-node@.service");
  CHECK(unit.count("Unit"));
  CHECK(unit.count("Install"));
  auto start = one(unit, "Service", "ExecStart");
  CHECK_THAT(start, Catch::StartsWith("/usr/local/bin/kvferry-launch "));
  CHECK_THAT(start, Catch::Contains("--cluster /etc/kvferry/cluster.toml"));
  CHECK_THAT(start, Catch::EndsWith("--node %i"));
  CHECK_THAT(one(unit, "Service", "ExecStartPre"), Catch::EndsWith("--check"));
  // Per-rank children stop with the unit; a refused file (exit 2) is not retried.
  CHECK(one(unit, "Service", "KillMode") == "control-group");
  CHECK(one(unit, "Service", "RestartPreventExitStatus") == "2");
  CHECK(one(unit, "Install", "WantedBy") == "multi-user.target");
}

TEST_CASE("deploy: the systemd unit restarts a node as the cluster file's defaults do",
          "[launch][deploy]") {
  auto unit = parse_ini(deploy + "/systemd/kvferry-node@.service");
  restart_policy defaults;
  CHECK(one(unit, "Service", "Restart") == "on-failure");
  // The first delay, and the growth up to the maximum (systemd 254 and newer).
  CHECK(parse_duration(one(unit, "Service", "RestartSec")) == defaults.backoff);
  CHECK(parse_duration(one(unit, "Service", "RestartMaxDelaySec")) == defaults.backoff_max);
  CHECK(std::stoi(one(unit, "Service", "RestartSteps")) > 0);
  // restart_limit restarts: the first start and as many again, within an
  // interval long enough for the backoff of all of them.
  CHECK(std::stoul(one(unit, "Unit", "StartLimitBurst")) == defaults.limit + 1);
  auto interval = std::chrono::seconds{std::stoi(one(unit, "Unit", "StartLimitIntervalSec"))};
  std::chrono::nanoseconds backoffs{0};
  for (uint32_t n = 1; n <= defaults.limit; ++n)
    backoffs += defaults.delay(n);
  CHECK(interval > backoffs);
  // Start limits belong to [Unit] (systemd ignores them in [Service] since 230).
  CHECK_FALSE(unit["Service"].count("StartLimitBurst"));
  CHECK_FALSE(unit["Service"].count("StartLimitIntervalSec"));
}

TEST_CASE("deploy: the Kubernetes manifests parse and match their cluster file",
          "[launch][deploy]") {
  std::map<std::string, std::vector<YAML::Node>> by_kind;
  for (auto& e : std::filesystem::directory_iterator{deploy + "/k8s"})
    if (e.path().extension() == ".yaml")
      for (auto& d : load_all(e.path()))
        by_kind[d["kind"].as<std::string>()].push_back(d);
  REQUIRE(by_kind["ConfigMap"].size() == 1);
  REQUIRE(by_kind["Namespace"].size() == 1);
  auto toml = by_kind["ConfigMap"][0]["data"]["cluster.toml"].as<std::string>();
  auto parsed = parse_cluster(toml, "k8s/configmap.yaml:cluster.toml");
  for (auto& e : parsed.errors)
    UNSCOPED_INFO(e);
  REQUIRE(parsed.cluster);
  auto& c = *parsed.cluster;
  // Inside each pod, the launcher restarts a per-rank child that dies.
  for (auto& n : c.nodes) {
    INFO("node " << n.name);
    CHECK(c.processes_of(n) == process_mode::per_rank);
    CHECK(n.restart.mode == restart_mode::on_failure);
  }
  // One StatefulSet (and one headless Service) per instance.
  REQUIRE(by_kind["StatefulSet"].size() == c.instances.size());
  REQUIRE(by_kind["Service"].size() == c.instances.size());
  std::set<std::string> services;
  for (auto& s : by_kind["Service"]) {
    CHECK(s["spec"]["clusterIP"].as<std::string>() == "None");
    services.insert(s["metadata"]["name"].as<std::string>());
  }
  for (auto& ss : by_kind["StatefulSet"]) {
    auto name = ss["metadata"]["name"].as<std::string>();
    INFO("StatefulSet " << name);
    auto* inst = c.find_instance(name);
    REQUIRE(inst);
    CHECK(services.count(ss["spec"]["serviceName"].as<std::string>()));
    // Its pod NAME-0 is the node of the file that runs the instance, found
    // at the pod's stable DNS name.
    auto* node = c.find_node(name + "-0");
    REQUIRE(node);
    CHECK(inst->node == node->name);
    CHECK_THAT(node->host, Catch::StartsWith(name + "-0." + name + "."));
    // The pod restarts by the kubelet's backoff: Always is all a StatefulSet takes.
    REQUIRE(ss["spec"]["template"]["spec"]["restartPolicy"]);
    CHECK(ss["spec"]["template"]["spec"]["restartPolicy"].as<std::string>() == "Always");
    auto container = ss["spec"]["template"]["spec"]["containers"][0];
    CHECK_THAT(container["command"][0].as<std::string>(), Catch::EndsWith("/kvferry-launch"));
    std::vector<std::string> args;
    for (auto a : container["args"])
      args.push_back(a.as<std::string>());
    CHECK(std::count(args.begin(), args.end(), "--node=$(POD_NAME)") == 1);
    CHECK(std::count(args.begin(), args.end(), "--cluster=/etc/kvferry/cluster.toml") == 1);
    // Every port the node listens on is declared.
    std::set<int> ports;
    for (auto p : container["ports"])
      ports.insert(p["containerPort"].as<int>());
    std::set<int> wanted{node->status_port};
    if (inst->role == instance_role::prefill)
      wanted.insert(inst->bootstrap_port);
    for (uint32_t k = 0; k < inst->tp * inst->pp; ++k)
      wanted.insert(inst->data_port + static_cast<int>(k));
    for (int p : wanted) {
      INFO("port " << p);
      CHECK(ports.count(p));
    }
    // Readiness is kvferry-ctl's verdict on this node and the nodes it needs.
    std::string probe;
    for (auto a : container["readinessProbe"]["exec"]["command"])
      probe += a.as<std::string>() + " ";
    CHECK_THAT(probe, Catch::Contains("kvferry-ctl --cluster=/etc/kvferry/cluster.toml status "
                                      "--node=\"$POD_NAME\""));
    CHECK(container["volumeMounts"][0]["mountPath"].as<std::string>() == "/etc/kvferry");
  }
}
