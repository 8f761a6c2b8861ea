#include "apps/common/cluster_file.hpp"

#include <algorithm>
#include <fstream>
#include <limits>
#include <map>
#include <set>

#include <toml++/toml.h>

#include "actors/common/durations.hpp"
#include "apps/common/cluster_checks.hpp"
#include "apps/common/cluster_dp.hpp"
#include "apps/common/host_pool.hpp"
#include "apps/common/toml_reader.hpp"
#include "transport/registry.hpp"

namespace kvferry::launch {

using namespace toml_reading;

namespace {

keys model_names() {
  keys out;
  for (auto& s : apps::named_shapes())
    out.push_back(s.name);
  return out;
}

void read_deadlines(reader& r, const toml::table& root, cluster_spec& c) {
  if (auto* t = r.table(root, "deadlines")) {
    r.only(*t, "[deadlines]", {"bootstrap", "waiting", "transfer", "verdict"});
    r.duration(*t, "[deadlines]", "bootstrap", c.limits.bootstrapping);
    r.duration(*t, "[deadlines]", "waiting", c.limits.waiting_for_input);
    r.duration(*t, "[deadlines]", "transfer", c.limits.transferring);
    r.duration(*t, "[deadlines]", "verdict", c.limits.verdict);
  }
  if (auto* t = r.table(root, "heartbeat")) {
    r.only(*t, "[heartbeat]", {"interval", "misses"});
    r.duration(*t, "[heartbeat]", "interval", c.limits.heartbeat);
    r.integer(*t, "[heartbeat]", "misses", c.limits.heartbeat_misses, false, 1, 1000);
  }
}

void read_staging(reader& r, const toml::table& root, cluster_spec& c) {
  auto* t = r.table(root, "staging");
  if (!t)
    return;
  r.only(*t, "[staging]", {"enabled", "ring_mib", "gather_mib"});
  r.boolean(*t, "[staging]", "enabled", c.staging.enabled);
  uint64_t mib = c.staging.ring_bytes >> 20;
  if (r.integer(*t, "[staging]", "ring_mib", mib, false, 1, 1 << 16))
    c.staging.ring_bytes = mib << 20;
  mib = c.staging.gather_bytes >> 20;
  if (r.integer(*t, "[staging]", "gather_mib", mib, false, 1, 1 << 16))
    c.staging.gather_bytes = mib << 20;
}

void read_tls(reader& r, const toml::table& root, cluster_spec& c) {
  auto* t = r.table(root, "tls");
  if (!t)
    return;
  r.only(*t, "[tls]", {"dir", "ca", "certificate", "key"});
  tls_spec s;
  s.line = reader::line_of(*t);
  r.text(*t, "[tls]", "dir", s.dir, true);
  r.text(*t, "[tls]", "ca", s.ca, false);
  r.text(*t, "[tls]", "certificate", s.certificate, false);
  r.text(*t, "[tls]", "key", s.key, false);
  for (auto* name : {&s.ca, &s.certificate, &s.key})
    if (name->empty() || name->find('/') != std::string::npos)
      r.fail(s.line, "[tls] file name \"" + *name +
                         "\" is not a plain file name; expected a "
                         "name inside dir (\"{node}\" stands for the node's name)");
  if (!s.dir.empty() && s.dir.front() != '/') {
    auto slash = c.file.rfind('/');
    if (slash != std::string::npos)
      s.dir = c.file.substr(0, slash + 1) + s.dir;
  }
  c.tls = std::move(s);
}

void read_workload(reader& r, const toml::table& root, cluster_spec& c) {
  auto* t = r.table(root, "workload");
  if (!t)
    return;
  const char* w = "[workload]";
  r.only(*t, w,
         {"requests", "requests_per_second", "min_tokens", "max_tokens", "page_size", "pool_pages",
          "aux_rows", "chunk_pages", "concurrency", "seed", "model", "progress"});
  workload_spec s;
  s.line = reader::line_of(*t);
  constexpr int64_t big = std::numeric_limits<int32_t>::max();
  r.integer(*t, w, "requests", s.requests, true, 1, big);
  r.integer(*t, w, "min_tokens", s.min_tokens, false, 1, big);
  uint32_t max_line = s.line;
  r.integer(*t, w, "max_tokens", s.max_tokens, false, 1, big, &max_line);
  r.integer(*t, w, "page_size", s.page_size, true, 1, max_page_size);
  r.integer(*t, w, "pool_pages", s.pool_pages, false, 1, big);
  r.integer(*t, w, "aux_rows", s.aux_rows, false, 1, big);
  r.integer(*t, w, "chunk_pages", s.chunk_pages, false, 0, big);
  r.integer(*t, w, "concurrency", s.concurrency, false, 1, big);
  r.integer(*t, w, "seed", s.seed, false, 0, std::numeric_limits<int64_t>::max());
  if (auto* n = t->get("requests_per_second")) {
    auto v = n->value<double>();  // an integer or a float
    if (!v || !(*v > 0) || *v > 1e6)
      r.fail(reader::line_of(*n), "requests_per_second in [workload] is " +
                                      (v ? std::to_string(*v) : "a " + type_name(*n)) +
                                      "; expected a number above 0 and at most 1000000");
    else
      s.requests_per_second = *v;
  }
  r.duration(*t, w, "progress", s.progress);
  if (r.text(*t, w, "model", s.model, true) && !apps::shape_named(s.model))
    r.fail(reader::line_of(*t->get("model")), "model = " + in_quotes(s.model) +
                                                  " is not a known model shape; expected one of " +
                                                  join(model_names()));
  if (s.max_tokens < s.min_tokens)
    r.fail(max_line, "max_tokens = " + std::to_string(s.max_tokens) + " is below min_tokens = " +
                         std::to_string(s.min_tokens) + "; expected max_tokens >= min_tokens");
  auto pages = (s.max_tokens + s.page_size - 1) / s.page_size;
  if (pages > s.pool_pages)
    r.fail(max_line, "max_tokens = " + std::to_string(s.max_tokens) + " takes " +
                         std::to_string(pages) + " pages of " + std::to_string(s.page_size) +
                         " tokens, more than pool_pages = " + std::to_string(s.pool_pages) +
                         "; expected a pool that holds the longest request");
  c.workload = s;
}

/// A "processes" key: "per-node" or "per-rank".
std::optional<process_mode> read_processes(reader& r, const toml::table& t,
                                           std::string_view where) {
  std::string text;
  if (!r.text(t, where, "processes", text, false))
    return std::nullopt;
  auto m = parse_process_mode(text);
  if (!m)
    r.fail(reader::line_of(*t.get("processes")),
           "processes = " + in_quotes(text) + " in " + std::string{where} +
               " is not a process mode; expected \"per-node\" (all ranks of a node in its "
               "process) or \"per-rank\" (one process per rank)");
  return m;
}

/// The restart keys of `t` over `p` (the file's policy for a [[node]]).
void read_restart(reader& r, const toml::table& t, std::string_view where, restart_policy& p) {
  std::string text;
  if (r.text(t, where, "restart", text, false)) {
    if (auto m = parse_restart_mode(text))
      p.mode = *m;
    else
      r.fail(reader::line_of(*t.get("restart")),
             "restart = " + in_quotes(text) + " in " + std::string{where} +
                 " is not a restart policy; expected \"never\" or \"on-failure\" (start a "
                 "process that died abnormally again)");
  }
  bool backoff = r.duration(t, where, "restart_backoff", p.backoff);
  bool backoff_max = r.duration(t, where, "restart_backoff_max", p.backoff_max);
  r.integer(t, where, "restart_limit", p.limit, false, 1, 100000);
  if (p.backoff_max >= p.backoff)
    return;
  // Name the key of this table that makes the pair wrong.
  auto value = [&](std::string_view key) {
    std::string v;
    r.text(t, where, key, v, false);
    return in_quotes(v);
  };
  if (backoff_max)
    r.fail(reader::line_of(*t.get("restart_backoff_max")),
           "restart_backoff_max = " + value("restart_backoff_max") + " in " + std::string{where} +
               " is below restart_backoff (" + format_duration(p.backoff) +
               "); expected a maximum at least as long as the first delay");
  else if (backoff)
    r.fail(reader::line_of(*t.get("restart_backoff")),
           "restart_backoff = " + value("restart_backoff") + " in " + std::string{where} +
               " is above restart_backoff_max (" + format_duration(p.backoff_max) +
               "); expected a first delay no longer than the maximum");
}

/// Keeps the first `cap` tables of `ts`, failing at the first one past it.
void cap_tables(reader& r, std::vector<const toml::table*>& ts, size_t cap, const char* what) {
  if (ts.size() <= cap)
    return;
  r.fail(reader::line_of(*ts[cap]), std::to_string(ts.size()) + " " + what +
                                        " tables; expected at most " + std::to_string(cap));
  ts.resize(cap);
}

void read_nodes(reader& r, const toml::table& root, cluster_spec& c) {
  std::map<std::string, uint32_t> seen;
  auto tables = r.tables(root, "node");
  cap_tables(r, tables, max_nodes, "[[node]]");
  for (auto* t : tables) {
    r.only(*t, "[[node]]",
           {"name", "host", "status_port", "metrics_port", "processes", "restart",
            "restart_backoff", "restart_backoff_max", "restart_limit"});
    node_spec n;
    n.line = reader::line_of(*t);
    bool ok = r.text(*t, "[[node]]", "name", n.name, true);
    ok &= r.text(*t, "[[node]]", "host", n.host, true);
    r.integer(*t, "[[node]]", "status_port", n.status_port, false, 0, 65535, &n.status_port_line);
    r.integer(*t, "[[node]]", "metrics_port", n.metrics_port, false, 0, 65535,
              &n.metrics_port_line);
    n.processes = read_processes(r, *t, "[[node]]");
    n.restart = c.restart;
    read_restart(r, *t, "[[node]]", n.restart);
    if (!ok)
      continue;
    if (auto [it, fresh] = seen.emplace(n.name, n.line); !fresh) {
      r.fail(reader::line_of(*t->get("name")), "duplicate node name " + in_quotes(n.name) +
                                                   "; it is already the name of the node at line " +
                                                   std::to_string(it->second));
      continue;
    }
    c.nodes.push_back(std::move(n));
  }
}

void read_instances(reader& r, const toml::table& root, cluster_spec& c) {
  std::map<std::string, uint32_t> seen;
  const char* w = "[[instance]]";
  auto tables = r.tables(root, "instance");
  cap_tables(r, tables, max_instances, "[[instance]]");
  uint64_t ranks = 0;  // of the instances so far
  for (auto* t : tables) {
    r.only(*t, w,
           {"name", "role", "node", "tp", "pp", "dp", "bootstrap_port", "data_port", "prefill",
            "checksum"});
    instance_spec s;
    s.line = reader::line_of(*t);
    bool ok = r.text(*t, w, "name", s.name, true);
    std::string role;
    if (r.text(*t, w, "role", role, true)) {
      if (role == "prefill" || role == "decode") {
        s.role = role == "prefill" ? instance_role::prefill : instance_role::decode;
      } else {
        r.fail(reader::line_of(*t->get("role")),
               "role = " + in_quotes(role) + " is not a role; expected \"prefill\" or \"decode\"");
        ok = false;
      }
    } else {
      ok = false;
    }
    if (r.text(*t, w, "node", s.node, true)) {
      if (!c.find_node(s.node)) {
        std::string known;
        for (auto& n : c.nodes)
          known += (known.empty() ? "" : ", ") + n.name;
        r.fail(reader::line_of(*t->get("node")), "node = " + in_quotes(s.node) +
                                                     " names no [[node]]; expected one of " +
                                                     (known.empty() ? "(none)" : known));
        ok = false;
      }
    } else {
      ok = false;
    }
    uint32_t tp_line = s.line;
    ok &= r.integer(*t, w, "tp", s.tp, true, 1, max_tp_size, &tp_line);
    ok &= r.integer(*t, w, "pp", s.pp, false, 1, max_pp_size) || !t->get("pp");
    ok &= read_dp(r, *t, s);
    if (ok && uint64_t{s.tp} * s.pp > max_instance_ranks) {
      r.fail(tp_line, "tp = " + std::to_string(s.tp) + " x pp = " + std::to_string(s.pp) +
                          " makes " + std::to_string(uint64_t{s.tp} * s.pp) +
                          " ranks; expected at most " + std::to_string(max_instance_ranks) +
                          " ranks per instance");
      ok = false;
    }
    if (ok && (ranks += uint64_t{s.tp} * s.pp) > max_cluster_ranks) {
      r.fail(tp_line, "instance at line " + std::to_string(s.line) + " brings the cluster to " +
                          std::to_string(ranks) + " ranks; expected at most " +
                          std::to_string(max_cluster_ranks));
      ok = false;
    }
    r.integer(*t, w, "data_port", s.data_port, false, 0, 65535, &s.data_port_line);
    if (s.data_port != 0 && s.data_port + s.tp * s.pp - 1 > 65535) {
      r.fail(s.data_port_line, "data_port = " + std::to_string(s.data_port) + " with " +
                                   std::to_string(s.tp * s.pp) +
                                   " ranks runs past port 65535; expected a lower first port");
      ok = false;
    }
    if (role == "prefill") {
      ok &= r.integer(*t, w, "bootstrap_port", s.bootstrap_port, true, 1, 65535,
                      &s.bootstrap_port_line);
      if (t->get("prefill")) {
        r.fail(reader::line_of(*t->get("prefill")),
               "prefill is a key of decode instances; expected no prefill in a prefill instance");
        ok = false;
      }
      if (auto* k = t->get("checksum")) {
        r.fail(reader::line_of(*k),
               "checksum is a key of decode instances (they check what lands); expected no "
               "checksum in a prefill instance");
        ok = false;
      }
    } else if (role == "decode") {
      std::string checksum;
      if (r.text(*t, w, "checksum", checksum, false)) {
        if (auto kind = checksum_named(checksum)) {
          s.checksum = *kind;
        } else {
          r.fail(reader::line_of(*t->get("checksum")),
                 "checksum = " + in_quotes(checksum) +
                     " is not a checksum; expected \"off\" or "
                     "\"xxh3\"");
          ok = false;
        }
      }
      if (auto* bp = t->get("bootstrap_port")) {
        r.fail(reader::line_of(*bp),
               "bootstrap_port is a key of prefill instances (decode finds the bootstrap "
               "through its prefill); expected no bootstrap_port in a decode instance");
        ok = false;
      }
      if (auto* p = t->get("prefill")) {
        if (auto* one = p->as_string()) {
          s.prefills.push_back(one->get());
        } else if (auto* many = p->as_array(); many && many->size() > max_prefills_per_decode) {
          r.fail(reader::line_of(*p),
                 "prefill in [[instance]] lists " + std::to_string(many->size()) +
                     " names; expected at most " + std::to_string(max_prefills_per_decode));
          ok = false;
        } else if (many && !many->empty()) {
          for (auto& e : *many)
            if (auto* str = e.as_string()) {
              s.prefills.push_back(str->get());
            } else {
              r.fail(reader::line_of(e), "prefill of a decode instance lists a " + type_name(e) +
                                             "; expected names of prefill instances");
              ok = false;
            }
        } else {
          r.fail(reader::line_of(*p), "prefill in [[instance]] is a " + type_name(*p) +
                                          "; expected a prefill instance's name or a "
                                          "non-empty list of them");
          ok = false;
        }
      }
    }
    if (!ok || s.name.empty())
      continue;
    if (auto [it, fresh] = seen.emplace(s.name, s.line); !fresh) {
      r.fail(reader::line_of(*t->get("name")),
             "duplicate instance name " + in_quotes(s.name) +
                 "; it is already the name of the instance at line " + std::to_string(it->second));
      continue;
    }
    c.instances.push_back(std::move(s));
  }
}

}  // namespace

cluster_parse parse_cluster(std::string_view text, const std::string& file) {
  cluster_parse out;
  if (text.size() > max_cluster_file_bytes) {
    out.errors.push_back(file + ": " + std::to_string(text.size()) +
                         " bytes read, more than a cluster file may have; expected at most " +
                         std::to_string(max_cluster_file_bytes) + " bytes (1 MiB)");
    return out;
  }
  toml::table root;
  try {
    root = toml::parse(text, file);
  } catch (const toml::parse_error& e) {
    out.errors.push_back(file + ":" + std::to_string(e.source().begin.line) +
                         ": not valid TOML: " + std::string{e.description()});
    return out;
  }
  reader r{file, out.errors};
  r.only(root, "the file",
         {"transport", "processes", "restart", "restart_backoff", "restart_backoff_max",
          "restart_limit", "deadlines", "heartbeat", "staging", "workload", "node", "instance",
          "tls", "insecure"});
  cluster_spec c;
  c.file = file;
  r.boolean(root, "the file", "insecure", c.insecure);
  if (auto m = read_processes(r, root, "the file"))
    c.processes = *m;
  read_restart(r, root, "the file", c.restart);
  if (auto* n = root.get("transport")) {
    r.text(root, "the file", "transport", c.transport, false);
    auto names = transport::backend_names();
    std::erase(names, "inproc");  // one process only: nodes are processes
    if (std::find(names.begin(), names.end(), c.transport) == names.end()) {
      keys ks(names.begin(), names.end());
      r.fail(reader::line_of(*n), "transport = " + in_quotes(c.transport) +
                                      " is not a data plane that crosses processes in this "
                                      "build; expected one of " +
                                      join(ks));
    }
  }
  read_deadlines(r, root, c);
  read_staging(r, root, c);
  read_tls(r, root, c);
  read_workload(r, root, c);
  read_nodes(r, root, c);
  read_instances(r, root, c);
  if (c.nodes.empty() && !root.get("node"))
    r.fail(1, "no [[node]]; expected at least one node with a name and a host");
  if (c.instances.empty() && !root.get("instance"))
    r.fail(1, "no [[instance]]; expected at least one prefill and one decode instance");
  // Pairs and ports only on instances that all parsed: an instance left out
  // would only show up again as a second, misleading error.
  if (out.errors.empty())
    split_dp_groups(r, c);
  if (out.errors.empty())
    check_pairs(r, root, c);
  if (out.errors.empty())
    check_ports(r, c);
  if (out.errors.empty() && c.workload)
    check_heads(r, root, c);
  if (c.workload && out.errors.empty()) {
    // Every instance must take part in the workload's rooms.
    for (auto& i : c.instances)
      if (!takes_part(c, i))
        r.fail(i.line, std::string{to_string(i.role)} + " instance " + in_quotes(i.name) +
                           " gets none of the " + std::to_string(c.workload->requests) +
                           " rooms of [workload] (at line " + std::to_string(c.workload->line) +
                           ")" +
                           (i.role == instance_role::prefill
                                ? "; expected a decode instance that names it in prefill"
                                : "; expected more requests"));
  }
  if (out.errors.empty())
    out.cluster = std::move(c);
  return out;
}

cluster_parse load_cluster(const std::string& path) {
  std::ifstream in{path};
  if (!in) {
    cluster_parse out;
    out.errors.push_back(path + ": cannot read the cluster file");
    return out;
  }
  // One byte past the cap is enough to refuse it (a path such as /dev/zero
  // must not be read whole).
  std::string text(max_cluster_file_bytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return parse_cluster(text, path);
}

}  // namespace kvferry::launch
