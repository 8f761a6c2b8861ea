#include "apps/common/cluster_checks.hpp"

#include <map>
#include <set>

#include "actors/plan/tp_mapping.hpp"
#include "apps/common/host_pool.hpp"

namespace kvferry::launch::toml_reading {

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

}  // namespace kvferry::launch::toml_reading
