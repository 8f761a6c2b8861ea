// deploy/: the systemd unit parses as INI and runs the launcher on the node
// of its instance name; the Kubernetes manifests parse as YAML (yaml-cpp),
// their cluster file (the ConfigMap) parses with the launcher's own parser,
// and each StatefulSet runs the launcher for a node of that file, opens the
// node's ports and probes readiness with kvferry-ctl status --node. Restarts:
// the unit restarts on failure with the timing of the cluster file's restart
// defaults; the pods restart Always (the kubelet's CrashLoopBackOff) and their
// cluster file restarts the per-rank children on failure.
//
// Hardening: the unit runs as the kvferry user, sandboxed, with the GPU and
// RDMA devices still reachable; every Kubernetes workload runs as non-root
// with every capability dropped, and a NetworkPolicy admits only the
// cluster's own pods on its ports; netns-cluster.sh (root) makes its state
// with mktemp -d and refuses a symlinked one; make-certs.sh makes a CA and a
// certificate per node that openssl verifies, with the node's name as CN
// (skipped, saying so, without openssl on PATH).
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "apps/common/cluster_file.hpp"

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

/// Every document of every deploy/k8s/*.yaml, by kind.
std::map<std::string, std::vector<YAML::Node>> k8s_by_kind() {
  std::map<std::string, std::vector<YAML::Node>> by_kind;
  for (auto& e : std::filesystem::directory_iterator{deploy + "/k8s"})
    if (e.path().extension() == ".yaml")
      for (auto& d : load_all(e.path()))
        by_kind[d["kind"].as<std::string>()].push_back(d);
  return by_kind;
}

std::string slurp(const std::string& path) {
  std::ifstream in{path};
  REQUIRE(in);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

/// Runs `cmd` with sh (stderr into stdout); its exit code and output.
std::pair<int, std::string> run(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  REQUIRE(p);
  std::array<char, 4096> buf;
  for (size_t n; (n = std::fread(buf.data(), 1, buf.size(), p)) > 0;)
    out.append(buf.data(), n);
  int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

std::string sh_quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s)
    out += c == '\'' ? std::string{"'\\''"} : std::string(1, c);
  return out + "'";
}

bool on_path(const std::string& tool) {
  return run("command -v " + tool + " >/dev/null").first == 0;
}

/// A fresh directory under the system's temporary directory, removed with it.
struct temp_dir {
  std::filesystem::path path;
  temp_dir() {
    auto templ = (std::filesystem::temp_directory_path() / "kvferry-deploy-test.XXXXXX").string();
    REQUIRE(::mkdtemp(templ.data()) != nullptr);
    path = templ;
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

/// Whether `ports` (a NetworkPolicy rule's) admits TCP `port`.
bool admits(const YAML::Node& ports, int port) {
  if (!ports)
    return true;  // no ports: every port
  for (auto p : ports) {
    if (p["protocol"] && p["protocol"].as<std::string>() != "TCP")
      continue;
    int first = p["port"].as<int>();
    int last = p["endPort"] ? p["endPort"].as<int>() : first;
    if (first <= port && port <= last)
      return true;
  }
  return false;
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
    // Under [tls]: the node's certificate comes from a Secret of its own,
    // mounted where the file's [tls] dir says.
    REQUIRE(c.tls);
    bool mounted = false;
    for (auto m : container["volumeMounts"])
      if (m["mountPath"].as<std::string>() == c.tls->dir)
        for (auto v : ss["spec"]["template"]["spec"]["volumes"])
          if (v["name"].as<std::string>() == m["name"].as<std::string>() && v["secret"])
            mounted = v["secret"]["secretName"].as<std::string>() == "kvferry-tls-" + name;
    CHECK(mounted);
  }
  // Every pod listens off loopback: the file has [tls] (a node refuses to
  // start there without it) and does not say insecure.
  CHECK(c.tls);
  CHECK_FALSE(c.insecure);
}

TEST_CASE("deploy: the systemd unit runs as its own user, sandboxed, devices reachable",
          "[launch][deploy][security]") {
  auto unit = parse_ini(deploy + "/systemd/kvferry-node@.service");
  auto& svc = unit["Service"];
  // Not root, and no way back to it.
  CHECK(one(unit, "Service", "User") == "kvferry");
  CHECK(one(unit, "Service", "Group") == "kvferry");
  CHECK_FALSE(svc.count("DynamicUser"));
  CHECK(one(unit, "Service", "NoNewPrivileges") == "yes");
  CHECK(one(unit, "Service", "CapabilityBoundingSet").empty());
  CHECK(one(unit, "Service", "AmbientCapabilities").empty());
  // The file system: read-only but for nothing, the config read-only too.
  CHECK(one(unit, "Service", "ProtectSystem") == "strict");
  CHECK(one(unit, "Service", "ProtectHome") == "yes");
  CHECK(one(unit, "Service", "PrivateTmp") == "yes");
  CHECK_THAT(one(unit, "Service", "ReadOnlyPaths"), Catch::Contains("/etc/kvferry"));
  for (auto* key : {"ProtectKernelTunables", "ProtectKernelModules", "ProtectControlGroups",
                    "RestrictNamespaces", "LockPersonality"}) {
    INFO(key);
    CHECK(one(unit, "Service", key) == "yes");
  }
  // The sockets it uses, and no others.
  std::istringstream families{one(unit, "Service", "RestrictAddressFamilies")};
  std::set<std::string> got{std::istream_iterator<std::string>{families}, {}};
  CHECK(got == std::set<std::string>{"AF_INET", "AF_INET6", "AF_UNIX", "AF_NETLINK"});
  // GPUs and RDMA devices stay reachable: no private /dev, and a closed
  // device policy that lists them.
  CHECK(one(unit, "Service", "PrivateDevices") == "no");
  CHECK(one(unit, "Service", "DevicePolicy") == "closed");
  std::set<std::string> allowed;
  for (auto [it, end] = svc.equal_range("DeviceAllow"); it != end; ++it)
    allowed.insert(it->second.substr(0, it->second.find(' ')));
  CHECK(allowed.count("char-nvidia*"));
  CHECK(allowed.count("char-infiniband*"));
  CHECK(allowed.count("/dev/infiniband/rdma_cm"));
  // RDMA pins memory; CUDA's JIT needs pages both writable and executable.
  CHECK(one(unit, "Service", "LimitMEMLOCK") == "infinity");
  CHECK_FALSE(
      (svc.count("MemoryDenyWriteExecute") && svc.find("MemoryDenyWriteExecute")->second == "yes"));
  // The user it names is made as the unit's comment says.
  auto text = slurp(deploy + "/systemd/kvferry-node@.service");
  CHECK_THAT(text, Catch::Contains("useradd --system"));
}

TEST_CASE("deploy: every Kubernetes workload runs as non-root with every capability dropped",
          "[launch][deploy][security]") {
  auto by_kind = k8s_by_kind();
  size_t workloads = 0;
  for (auto* kind : {"StatefulSet", "Deployment", "DaemonSet", "Job", "Pod"}) {
    for (auto& w : by_kind[kind]) {
      ++workloads;
      auto name = w["metadata"]["name"].as<std::string>();
      INFO(kind << " " << name);
      auto pod = std::string{kind} == "Pod" ? w["spec"] : w["spec"]["template"]["spec"];
      REQUIRE(pod["securityContext"]);
      auto psc = pod["securityContext"];
      CHECK(psc["runAsNonRoot"].as<bool>());
      REQUIRE(psc["runAsUser"]);
      CHECK(psc["runAsUser"].as<int>() == 10001);
      CHECK(psc["runAsGroup"].as<int>() == 10001);
      CHECK(psc["seccompProfile"]["type"].as<std::string>() == "RuntimeDefault");
      REQUIRE(pod["automountServiceAccountToken"]);
      CHECK_FALSE(pod["automountServiceAccountToken"].as<bool>());
      CHECK_FALSE(pod["hostNetwork"]);
      CHECK_FALSE(pod["hostPID"]);
      CHECK_FALSE(pod["hostIPC"]);
      std::vector<YAML::Node> containers;
      for (auto* list : {"containers", "initContainers"})
        for (auto c : pod[list])
          containers.push_back(c);
      REQUIRE_FALSE(containers.empty());
      for (auto& c : containers) {
        INFO("container " << c["name"].as<std::string>());
        REQUIRE(c["securityContext"]);
        auto csc = c["securityContext"];
        CHECK_FALSE(csc["allowPrivilegeEscalation"].as<bool>());
        CHECK_FALSE((csc["privileged"] && csc["privileged"].as<bool>()));
        CHECK(csc["readOnlyRootFilesystem"].as<bool>());
        CHECK_FALSE((csc["runAsUser"] && csc["runAsUser"].as<int>() == 0));
        std::set<std::string> drop, add;
        for (auto d : csc["capabilities"]["drop"])
          drop.insert(d.as<std::string>());
        for (auto a : csc["capabilities"]["add"])
          add.insert(a.as<std::string>());
        CHECK(drop.count("ALL"));
        // IPC_LOCK (RDMA's memlock) is the one capability that may come back.
        for (auto& a : add) {
          INFO("capability " << a);
          CHECK(a == "IPC_LOCK");
        }
      }
    }
  }
  CHECK(workloads > 0);
}

TEST_CASE("deploy: the NetworkPolicy admits only the cluster's own pods, on their ports",
          "[launch][deploy][security]") {
  auto by_kind = k8s_by_kind();
  REQUIRE(by_kind["NetworkPolicy"].size() == 1);
  REQUIRE(by_kind["Namespace"].size() == 1);
  auto np = by_kind["NetworkPolicy"][0];
  auto ns = by_kind["Namespace"][0]["metadata"]["name"].as<std::string>();
  CHECK(np["metadata"]["namespace"].as<std::string>() == ns);
  // It selects the pods of every StatefulSet, by the label they all carry.
  const std::string label = "app.kubernetes.io/name";
  auto app = np["spec"]["podSelector"]["matchLabels"][label];
  REQUIRE(app);
  auto app_name = app.as<std::string>();
  CHECK(np["spec"]["podSelector"]["matchLabels"].size() == 1);
  std::set<int> ports;
  for (auto& ss : by_kind["StatefulSet"]) {
    INFO("StatefulSet " << ss["metadata"]["name"].as<std::string>());
    CHECK(ss["metadata"]["namespace"].as<std::string>() == ns);
    CHECK(ss["spec"]["template"]["metadata"]["labels"][label].as<std::string>() == app_name);
    for (auto c : ss["spec"]["template"]["spec"]["containers"])
      for (auto p : c["ports"])
        ports.insert(p["containerPort"].as<int>());
  }
  REQUIRE_FALSE(ports.empty());
  std::set<std::string> types;
  for (auto t : np["spec"]["policyTypes"])
    types.insert(t.as<std::string>());
  CHECK(types == std::set<std::string>{"Ingress", "Egress"});
  // A peer is one of the cluster's pods: no address blocks, no other
  // namespaces, no rule without peers (that would admit everyone).
  auto is_cluster_pod = [&](const YAML::Node& peer) {
    return peer["podSelector"] && !peer["namespaceSelector"] && !peer["ipBlock"] &&
           peer["podSelector"]["matchLabels"][label] &&
           peer["podSelector"]["matchLabels"][label].as<std::string>() == app_name;
  };
  std::set<int> in_ports, out_ports;
  REQUIRE(np["spec"]["ingress"].size() > 0);
  for (auto rule : np["spec"]["ingress"]) {
    REQUIRE(rule["from"]);
    REQUIRE(rule["from"].size() > 0);
    for (auto peer : rule["from"])
      CHECK(is_cluster_pod(peer));
    REQUIRE(rule["ports"]);
    for (int p : ports)
      if (admits(rule["ports"], p))
        in_ports.insert(p);
  }
  CHECK(in_ports == ports);
  // Egress: the cluster's pods on the same ports, and DNS (port 53) only.
  bool dns = false;
  for (auto rule : np["spec"]["egress"]) {
    REQUIRE(rule["to"]);
    REQUIRE(rule["ports"]);
    bool to_pods = true;
    for (auto peer : rule["to"])
      to_pods = to_pods && is_cluster_pod(peer);
    if (to_pods) {
      for (int p : ports)
        if (admits(rule["ports"], p))
          out_ports.insert(p);
      continue;
    }
    for (auto p : rule["ports"])
      CHECK(p["port"].as<int>() == 53);
    for (auto peer : rule["to"])
      CHECK_FALSE(peer["ipBlock"]);
    dns = true;
  }
  CHECK(out_ports == ports);
  CHECK(dns);
}

TEST_CASE("deploy: netns-cluster.sh keeps its state in a private mktemp directory",
          "[launch][deploy][security]") {
  auto script = deploy + "/netns-cluster.sh";
  auto text = slurp(script);
  CHECK_THAT(text, Catch::Contains("set -euo pipefail"));
  CHECK_THAT(text, Catch::Contains("umask 077"));
  CHECK_THAT(text, Catch::Contains("mktemp -d"));
  CHECK_THAT(text, Catch::Contains("trap "));
  // No fixed, guessable directory under /tmp as root's default.
  CHECK_THAT(text, !Catch::Contains("state:-/tmp"));
  CHECK_THAT(text, !Catch::Contains("mkdir -p \"$state\""));
  CHECK(run("bash -n " + sh_quoted(script)).first == 0);
  // A --state that is a symlink is refused before anything else is done
  // (down: no root or network namespace needed to get that far).
  temp_dir tmp;
  auto real = tmp.path / "real";
  auto link = tmp.path / "link";
  std::filesystem::create_directory(real);
  std::filesystem::create_directory_symlink(real, link);
  auto [rc, out] =
      run("bash " + sh_quoted(script) + " --prefix kvfdt --state " + sh_quoted(link.string()) +
          " --bin /nonexistent down " + sh_quoted(deploy + "/clusters/netns-3node.toml"));
  INFO(out);
  CHECK(rc == 2);
  CHECK_THAT(out, Catch::Contains("is a symlink"));
}

TEST_CASE("deploy: make-certs.sh makes a cluster CA and a certificate per node",
          "[launch][deploy][security]") {
  auto script = deploy + "/make-certs.sh";
  REQUIRE(::access(script.c_str(), X_OK) == 0);
  CHECK(run("bash -n " + sh_quoted(script)).first == 0);
  if (!on_path("openssl")) {
    std::cout << "SKIPPED: openssl is not on PATH (make-certs.sh needs the openssl command)"
              << std::endl;
    return;
  }
  auto file = deploy + "/clusters/1p1d.toml";
  auto parsed = load_cluster(file);
  REQUIRE(parsed.cluster);
  temp_dir tmp;
  auto dir = (tmp.path / "certs").string();
  auto [rc, out] =
      run(sh_quoted(script) + " " + sh_quoted(file) + " " + sh_quoted(dir) + " --days 2");
  INFO(out);
  REQUIRE(rc == 0);
  auto mode = [](const std::string& path) {
    struct stat st {};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    return st.st_mode & 07777;
  };
  auto ca = dir + "/ca.pem";
  CHECK(mode(dir + "/ca.key") == 0600);
  auto [ca_rc, ca_out] = run("openssl x509 -noout -ext basicConstraints -in " + sh_quoted(ca));
  CHECK(ca_rc == 0);
  CHECK_THAT(ca_out, Catch::Contains("CA:TRUE"));
  REQUIRE(parsed.cluster->nodes.size() == 2);
  for (auto& n : parsed.cluster->nodes) {
    INFO("node " << n.name);
    auto pem = dir + "/" + n.name + ".pem";
    auto key = dir + "/" + n.name + ".key";
    CHECK_THAT(out, Catch::Contains(pem));
    CHECK(mode(key) == 0600);
    auto [v_rc, v_out] = run("openssl verify -CAfile " + sh_quoted(ca) + " " + sh_quoted(pem));
    CHECK(v_rc == 0);
    CHECK_THAT(v_out, Catch::Contains(": OK"));
    auto [s_rc, s_out] = run(
        "openssl x509 -noout -subject -nameopt RFC2253 -ext subjectAltName,extendedKeyUsage -in " +
        sh_quoted(pem));
    CHECK(s_rc == 0);
    CHECK_THAT(s_out, Catch::Contains("subject=CN=" + n.name + "\n"));
    CHECK_THAT(s_out, Catch::Contains("IP Address:" + n.host));
    CHECK_THAT(s_out, Catch::Contains("TLS Web Server Authentication"));
    CHECK_THAT(s_out, Catch::Contains("TLS Web Client Authentication"));
    // The key is the certificate's.
    auto [k_rc, k_pub] = run("openssl pkey -pubout -in " + sh_quoted(key));
    auto [c_rc, c_pub] = run("openssl x509 -noout -pubkey -in " + sh_quoted(pem));
    CHECK(k_rc == 0);
    CHECK(c_rc == 0);
    CHECK(k_pub == c_pub);
  }
  // The CA's key is never overwritten without --force.
  auto before = slurp(dir + "/ca.key");
  auto [again_rc, again_out] =
      run(sh_quoted(script) + " " + sh_quoted(file) + " " + sh_quoted(dir));
  CHECK(again_rc == 2);
  CHECK_THAT(again_out, Catch::Contains("ca.key exists"));
  CHECK(slurp(dir + "/ca.key") == before);
  // A bad value is named, with what was expected.
  auto bad = (tmp.path / "bad.toml").string();
  std::ofstream{bad} << "[[node]]\nname = \"a/b\"\nhost = \"10.0.0.1\"\n";
  auto [bad_rc, bad_out] =
      run(sh_quoted(script) + " " + sh_quoted(bad) + " " + sh_quoted(dir + "-bad"));
  CHECK(bad_rc == 2);
  CHECK_THAT(bad_out, Catch::Contains("\"a/b\"") && Catch::Contains("expected"));
  CHECK_FALSE(std::filesystem::exists(dir + "-bad"));
}
