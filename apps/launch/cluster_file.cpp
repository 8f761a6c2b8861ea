#include "apps/launch/cluster_file.hpp"

#include <algorithm>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include <toml++/toml.h>

#include "actors/common/durations.hpp"
#include "actors/plan/tp_mapping.hpp"
#include "apps/common/host_pool.hpp"
#include "transport/registry.hpp"

namespace kvferry::launch {

namespace {

using keys = std::vector<std::string_view>;

std::string join(const keys& ks) {
  std::string out;
  for (auto k : ks)
    out += (out.empty() ? "" : ", ") + std::string{k};
  return out;
}

std::string type_name(const toml::node& n) {
  std::ostringstream os;
  os << n.type();
  return os.str();
}

std::string in_quotes(std::string_view s) {
  return "\"" + std::string{s} + "\"";
}

/// Reads typed values out of toml++ tables, recording every error with its line.
class reader {
 public:
  reader(std::string file, std::vector<std::string>& errors)
      : file_(std::move(file)), errors_(errors) {}

  static uint32_t line_of(const toml::node& n) { return n.source().begin.line; }

  void fail(uint32_t line, const std::string& why) {
    errors_.push_back(file_ + ":" + std::to_string(line) + ": " + why);
  }

  /// Refuses every key of `t` not in `allowed`.
  void only(const toml::table& t, std::string_view where, const keys& allowed) {
    for (auto&& [k, v] : t)
      if (std::find(allowed.begin(), allowed.end(), k.str()) == allowed.end())
        fail(line_of(v), "unknown key " + in_quotes(k.str()) + " in " + std::string{where} +
                             "; expected one of " + join(allowed));
  }

  /// A string; `required` reports its absence at the table's line.
  bool text(const toml::table& t, std::string_view where, std::string_view key, std::string& out,
            bool required) {
    auto* n = t.get(key);
    if (!n) {
      if (required)
        fail(line_of(t),
             "missing " + std::string{key} + " in " + std::string{where} + "; expected a string");
      return false;
    }
    if (auto* s = n->as_string()) {
      out = s->get();
      return true;
    }
    fail(line_of(*n), std::string{key} + " in " + std::string{where} + " is a " + type_name(*n) +
                          "; expected a string");
    return false;
  }

  /// A boolean (true or false).
  bool boolean(const toml::table& t, std::string_view where, std::string_view key, bool& out) {
    auto* n = t.get(key);
    if (!n)
      return false;
    if (auto* b = n->as_boolean()) {
      out = b->get();
      return true;
    }
    fail(line_of(*n), std::string{key} + " in " + std::string{where} + " is a " + type_name(*n) +
                          "; expected true or false");
    return false;
  }

  /// An integer in [lo, hi]; the line of the value goes to `line` when given.
  template <class T>
  bool integer(const toml::table& t, std::string_view where, std::string_view key, T& out,
               bool required, int64_t lo, int64_t hi, uint32_t* line = nullptr) {
    auto* n = t.get(key);
    if (!n) {
      if (required)
        fail(line_of(t), "missing " + std::string{key} + " in " + std::string{where} +
                             "; expected an integer in " + std::to_string(lo) + ".." +
                             std::to_string(hi));
      return false;
    }
    if (line)
      *line = line_of(*n);
    auto* i = n->as_integer();
    if (!i) {
      fail(line_of(*n), std::string{key} + " in " + std::string{where} +
                            " is not an integer; expected an integer in " + std::to_string(lo) +
                            ".." + std::to_string(hi));
      return false;
    }
    auto v = i->get();
    if (v < lo || v > hi) {
      fail(line_of(*n), std::string{key} + " = " + std::to_string(v) + " in " + std::string{where} +
                            " is out of range; expected " + std::to_string(lo) + ".." +
                            std::to_string(hi));
      return false;
    }
    out = static_cast<T>(v);
    return true;
  }

  /// A duration string ("200ms", "20s").
  bool duration(const toml::table& t, std::string_view where, std::string_view key,
                std::chrono::nanoseconds& out) {
    std::string s;
    if (!text(t, where, key, s, false))
      return false;
    auto d = parse_duration(s);
    if (!d || d->count() <= 0) {
      fail(line_of(*t.get(key)), std::string{key} + " = " + in_quotes(s) + " in " +
                                     std::string{where} +
                                     " is not a positive duration; expected a number with a "
                                     "unit: ns, us, ms, s, min (e.g. \"200ms\", \"20s\")");
      return false;
    }
    out = *d;
    return true;
  }

  /// A table at `key` of the root, or null (with an error if it is something else).
  const toml::table* table(const toml::table& root, std::string_view key) {
    auto* n = root.get(key);
    if (!n)
      return nullptr;
    if (auto* t = n->as_table())
      return t;
    fail(line_of(*n), std::string{key} + " is not a table; expected [" + std::string{key} + "]");
    return nullptr;
  }

  /// The tables of an array of tables at `key` of the root.
  std::vector<const toml::table*> tables(const toml::table& root, std::string_view key) {
    std::vector<const toml::table*> out;
    auto* n = root.get(key);
    if (!n)
      return out;
    auto* a = n->as_array();
    if (!a || !a->is_array_of_tables()) {
      fail(line_of(*n),
           std::string{key} + " is not an array of tables; expected [[" + std::string{key} + "]]");
      return out;
    }
    for (auto& e : *a)
      out.push_back(e.as_table());
    return out;
  }

 private:
  std::string file_;
  std::vector<std::string>& errors_;
};

/// The names of apps/common's model shapes.
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
    r.only(
        *t, w,
        {"name", "role", "node", "tp", "pp", "bootstrap_port", "data_port", "prefill", "checksum"});
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

/// Pairs decode instances with their prefill and checks that the sizes map.
void check_pairs(reader& r, const toml::table& root, cluster_spec& c) {
  std::vector<const instance_spec*> prefills;
  for (auto& i : c.instances)
    if (i.role == instance_role::prefill)
      prefills.push_back(&i);
  auto tables = r.tables(root, "instance");
  auto table_of = [&](const instance_spec& s) -> const toml::table* {
    for (auto* t : tables)
      if (reader::line_of(*t) == s.line)
        return t;
    return nullptr;
  };
  for (auto& d : c.instances) {
    if (d.role != instance_role::decode)
      continue;
    if (d.prefills.empty()) {
      if (prefills.size() != 1) {
        r.fail(d.line, "decode instance " + in_quotes(d.name) +
                           " names no prefill, and the file has " +
                           std::to_string(prefills.size()) +
                           " prefill instances; expected prefill = \"NAME\" or a list of names");
        continue;
      }
      d.prefills.push_back(prefills.front()->name);
    }
    for (auto& name : d.prefills) {
      auto* p = c.find_instance(name);
      if (!p || p->role != instance_role::prefill) {
        auto* t = table_of(d);
        auto line = t && t->get("prefill") ? reader::line_of(*t->get("prefill")) : d.line;
        r.fail(line, "prefill = " + in_quotes(name) + " of decode instance " + in_quotes(d.name) +
                         " names no prefill instance");
        continue;
      }
      if (auto bad = check_sizes({p->tp, p->pp}, {d.tp, d.pp})) {
        auto* t = table_of(d);
        auto line = t && t->get("tp") ? reader::line_of(*t->get("tp")) : d.line;
        r.fail(line, "decode instance " + in_quotes(d.name) + " (TP " + std::to_string(d.tp) +
                         " x PP " + std::to_string(d.pp) +
                         ") cannot receive from prefill instance " + in_quotes(p->name) + " (TP " +
                         std::to_string(p->tp) + " x PP " + std::to_string(p->pp) + "): " + *bad);
      }
    }
  }
}

/// Refuses a TP size that does not split the workload model's kv heads
/// evenly (nor replicates them evenly).
void check_heads(reader& r, const toml::table& root, const cluster_spec& c) {
  auto shape = apps::shape_named(c.workload->model);
  if (!shape || shape->mla)
    return;  // MLA: one latent, replicated on every rank
  uint32_t heads = shape->kv_heads;
  auto tables = r.tables(root, "instance");
  for (auto& i : c.instances) {
    if (heads % i.tp == 0 || i.tp % heads == 0)
      continue;
    uint32_t line = i.line;
    for (auto* t : tables)
      if (reader::line_of(*t) == i.line && t->get("tp"))
        line = reader::line_of(*t->get("tp"));
    r.fail(line, "tp = " + std::to_string(i.tp) + " of instance " + in_quotes(i.name) +
                     " does not split the " + std::to_string(heads) + " kv heads of model " +
                     in_quotes(c.workload->model) +
                     "; expected a TP size that divides the heads or a multiple of them");
  }
}

/// Whether instance `i` gets a room of the workload: what !rooms_of(i).empty()
/// says, without walking every room (requests go up to 2^31). Decode instance
/// k (of D, in file order) gets rooms k+1, k+1+D, ...; its m-th room goes to
/// its prefill m mod P, so prefill j of it first gets room k+1+j·D.
bool takes_part(const cluster_spec& c, const instance_spec& i) {
  uint64_t requests = c.workload ? c.workload->requests : 0;
  uint64_t decodes = 0;
  for (auto& x : c.instances)
    decodes += x.role == instance_role::decode;
  uint64_t k = 0;  // index of the decode instance
  for (auto& d : c.instances) {
    if (d.role != instance_role::decode)
      continue;
    if (&d == &i)
      return k + 1 <= requests;
    if (i.role == instance_role::prefill)
      for (uint64_t j = 0; j < d.prefills.size(); ++j)
        if (d.prefills[j] == i.name && k + 1 + j * decodes <= requests)
          return true;
    ++k;
  }
  return false;
}

/// Refuses two listeners on one port of one host.
void check_ports(reader& r, cluster_spec& c) {
  struct use {
    std::string what;
    uint32_t line;
  };
  std::map<std::pair<std::string, uint32_t>, use> taken;
  auto claim = [&](const std::string& host, uint32_t port, const std::string& what, uint32_t line) {
    auto [it, fresh] = taken.emplace(std::make_pair(host, port), use{what, line});
    if (!fresh)
      r.fail(line, what + " uses port " + std::to_string(port) + " on " + host +
                       ", already taken by " + it->second.what + " at line " +
                       std::to_string(it->second.line) + "; expected distinct ports per host");
  };
  for (auto& n : c.nodes) {
    if (n.status_port != 0)
      claim(n.host, n.status_port, "status_port of node " + in_quotes(n.name), n.status_port_line);
    if (n.metrics_port != 0)
      claim(n.host, n.metrics_port, "metrics_port of node " + in_quotes(n.name),
            n.metrics_port_line);
  }
  for (auto& i : c.instances) {
    auto* n = c.find_node(i.node);
    if (!n)
      continue;
    if (i.bootstrap_port != 0)
      claim(n->host, i.bootstrap_port, "bootstrap_port of " + in_quotes(i.name),
            i.bootstrap_port_line);
    if (i.data_port != 0)
      for (uint32_t k = 0; k < i.tp * i.pp; ++k)
        claim(n->host, i.data_port + k,
              "data_port of " + in_quotes(i.name) + " (rank " + std::to_string(k) + ")",
              i.data_port_line);
  }
}

}  // namespace

tls_files tls_spec::files_of(const std::string& node) const {
  auto path = [&](const std::string& name) {
    auto out = name;
    for (auto at = out.find("{node}"); at != std::string::npos;
         at = out.find("{node}", at + node.size()))
      out.replace(at, 6, node);
    return dir + "/" + out;
  };
  return tls_files{path(certificate), path(key), path(ca), {}};
}

const node_spec* cluster_spec::find_node(std::string_view name) const {
  for (auto& n : nodes)
    if (n.name == name)
      return &n;
  return nullptr;
}

const instance_spec* cluster_spec::find_instance(std::string_view name) const {
  for (auto& i : instances)
    if (i.name == name)
      return &i;
  return nullptr;
}

const instance_spec* cluster_spec::prefill_of(const instance_spec& d) const {
  return d.prefills.empty() ? nullptr : find_instance(d.prefills.front());
}

process_mode cluster_spec::processes_of(const node_spec& n) const {
  return n.processes.value_or(processes);
}

const instance_spec* cluster_spec::decode_of(uint64_t room) const {
  std::vector<const instance_spec*> decodes;
  for (auto& i : instances)
    if (i.role == instance_role::decode)
      decodes.push_back(&i);
  if (decodes.empty() || room == 0)
    return nullptr;
  return decodes[(room - 1) % decodes.size()];
}

const instance_spec* cluster_spec::source_of(uint64_t room) const {
  auto* d = decode_of(room);
  if (!d || d->prefills.empty())
    return nullptr;
  size_t decodes = 0;
  for (auto& i : instances)
    decodes += i.role == instance_role::decode;
  // The k-th room of this decode instance goes to its k-th prefill, in turn.
  auto k = (room - 1) / decodes;
  return find_instance(d->prefills[k % d->prefills.size()]);
}

std::vector<uint64_t> cluster_spec::rooms_of(const instance_spec& i) const {
  std::vector<uint64_t> out;
  if (!workload)
    return out;
  for (uint64_t r = 1; r <= workload->requests; ++r) {
    auto* mine = i.role == instance_role::decode ? decode_of(r) : source_of(r);
    if (mine == &i)
      out.push_back(r);
  }
  return out;
}

const char* to_string(instance_role r) {
  return r == instance_role::prefill ? "prefill" : "decode";
}

const char* to_string(process_mode m) {
  return m == process_mode::per_node ? "per-node" : "per-rank";
}

std::optional<process_mode> parse_process_mode(std::string_view text) {
  if (text == "per-node")
    return process_mode::per_node;
  if (text == "per-rank")
    return process_mode::per_rank;
  return std::nullopt;
}

std::chrono::nanoseconds restart_policy::delay(uint32_t n) const {
  auto d = backoff;
  for (uint32_t k = 1; k < n && d < backoff_max; ++k)
    d *= 2;
  return std::min(d, backoff_max);
}

const char* to_string(restart_mode m) {
  return m == restart_mode::never ? "never" : "on-failure";
}

std::optional<restart_mode> parse_restart_mode(std::string_view text) {
  if (text == "never")
    return restart_mode::never;
  if (text == "on-failure")
    return restart_mode::on_failure;
  return std::nullopt;
}

std::string to_string(const restart_policy& p) {
  if (!p.on())
    return "never";
  return std::string{"on-failure, "} + format_duration(p.backoff) + " doubling up to " +
         format_duration(p.backoff_max) + ", at most " + std::to_string(p.limit) +
         (p.limit == 1 ? " restart" : " restarts");
}

std::optional<std::chrono::nanoseconds> parse_duration(std::string_view text) {
  size_t i = 0;
  while (i < text.size() && ((text[i] >= '0' && text[i] <= '9') || text[i] == '.'))
    ++i;
  if (i == 0 || i > 18)
    return std::nullopt;
  double v = 0;
  try {
    size_t used = 0;
    v = std::stod(std::string{text.substr(0, i)}, &used);
    if (used != i)
      return std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;
  }
  auto unit = text.substr(i);
  double ns_per = 0;
  if (unit == "ns")
    ns_per = 1;
  else if (unit == "us")
    ns_per = 1e3;
  else if (unit == "ms")
    ns_per = 1e6;
  else if (unit == "s")
    ns_per = 1e9;
  else if (unit == "min")
    ns_per = 60e9;
  else
    return std::nullopt;
  // Past ~292 years the nanoseconds do not fit an int64 (and the cast would
  // be undefined).
  auto ns = v * ns_per;
  if (!(ns < 9.2e18))
    return std::nullopt;
  return std::chrono::nanoseconds{static_cast<int64_t>(ns)};
}

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
