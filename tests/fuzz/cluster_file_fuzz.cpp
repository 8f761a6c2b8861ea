// Fuzz harness: the cluster-file parser (apps/common/cluster_file.cpp,
// parse_cluster, and parse_duration on the file's first line). The input is
// the file's text.
//
// Invariants (a broken one aborts: a finding):
//   - a file is either a cluster or a list of errors, never both nor neither,
//     and every error starts "FILE:" (it names where);
//   - a parsed cluster is within the caps of cluster_file.hpp and
//     messages/layout.hpp, every decode instance names prefill instances it
//     can receive from (check_sizes), and, with a workload, every instance
//     takes part in it (checked against rooms_of() when the workload is
//     small enough to walk).
#include <string>
#include <string_view>

#include "actors/plan/tp_mapping.hpp"
#include "apps/common/cluster_file.hpp"
#include "tests/fuzz/fuzz_main.hpp"

using namespace kvferry;
using namespace kvferry::launch;

int kvferry_fuzz_one(const uint8_t* data, size_t size) {
  std::string_view text{reinterpret_cast<const char*>(data), size};
  parse_duration(text.substr(0, text.find('\n')));
  auto p = parse_cluster(text, "fuzz.toml");
  fuzz_check(p.cluster.has_value() != !p.errors.empty(), "a cluster or errors");
  for (auto& e : p.errors)
    fuzz_check(e.rfind("fuzz.toml:", 0) == 0, "an error names the file");
  if (!p.cluster)
    return 0;
  auto& c = *p.cluster;
  fuzz_check(c.nodes.size() <= max_nodes && c.instances.size() <= max_instances, "lists capped");
  uint64_t ranks = 0;
  for (auto& i : c.instances) {
    fuzz_check(i.tp >= 1 && i.tp <= max_tp_size && i.pp >= 1 && i.pp <= max_pp_size,
               "TP and PP within the caps");
    fuzz_check(uint64_t{i.tp} * i.pp <= max_instance_ranks, "ranks of an instance capped");
    ranks += uint64_t{i.tp} * i.pp;
    fuzz_check(c.find_node(i.node) != nullptr, "an instance runs on a node");
    if (i.role != instance_role::decode)
      continue;
    fuzz_check(!i.prefills.empty(), "a decode instance has a prefill");
    for (auto& name : i.prefills) {
      auto* pf = c.find_instance(name);
      fuzz_check(pf && pf->role == instance_role::prefill, "it names a prefill instance");
      fuzz_check(!check_sizes({pf->tp, pf->pp}, {i.tp, i.pp}), "whose sizes map");
    }
  }
  fuzz_check(ranks <= max_cluster_ranks, "ranks of the cluster capped");
  // rooms_of() walks every room, and each room every instance: small ones only.
  if (c.workload && uint64_t{c.workload->requests} * c.instances.size() <= 100000)
    for (auto& i : c.instances)
      fuzz_check(!c.rooms_of(i).empty(), "every instance takes part in the workload");
  return 0;
}
