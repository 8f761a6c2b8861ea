// DP attention groups in the cluster file (cluster_dp.hpp).
#include "apps/common/cluster_dp.hpp"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "actors/plan/dp_groups.hpp"
#include "apps/common/cluster_file.hpp"
#include "messages/layout.hpp"

namespace kvferry::launch::toml_reading {

bool read_dp(reader& r, const toml::table& t, instance_spec& s) {
  if (!t.get("dp"))
    return true;
  if (!r.integer(t, "[[instance]]", "dp", s.dp, false, 1, max_tp_size, &s.dp_line))
    return false;
  if (auto bad = validate(dp_shape{s.tp, s.dp}, "instance " + in_quotes(s.name) + ":")) {
    r.fail(s.dp_line, *bad);
    return false;
  }
  return true;
}

namespace {

/// Group `g` of `whole` (dp > 1).
instance_spec group_of(const instance_spec& whole, uint32_t g) {
  instance_spec out = whole;
  out.name = dp_group_instance(whole.name, g, whole.dp);
  out.tp = whole.tp / whole.dp;
  out.dp = 1;
  out.dp_group = true;
  if (whole.bootstrap_port != 0)
    out.bootstrap_port = static_cast<uint16_t>(whole.bootstrap_port + g);
  if (whole.data_port != 0)
    out.data_port = static_cast<uint16_t>(whole.data_port + g * out.tp * out.pp);
  return out;
}

}  // namespace

void split_dp_groups(reader& r, cluster_spec& c) {
  std::map<std::string, std::vector<std::string>> groups;  // split instance -> its groups
  std::vector<instance_spec> out;
  // The file's one prefill instance, which a decode instance may leave unnamed.
  std::string implied;
  size_t prefills_in_file = 0;
  for (auto& i : c.instances)
    if (i.role == instance_role::prefill && ++prefills_in_file == 1)
      implied = i.name;
  if (prefills_in_file != 1)
    implied.clear();
  for (auto& i : c.instances) {
    if (i.dp <= 1) {
      out.push_back(i);
      continue;
    }
    if (i.bootstrap_port != 0 && i.bootstrap_port + i.dp - 1 > 65535) {
      r.fail(i.bootstrap_port_line, "bootstrap_port = " + std::to_string(i.bootstrap_port) +
                                        " of " + in_quotes(i.name) +
                                        " with dp = " + std::to_string(i.dp) +
                                        " runs past port 65535 (group g listens on "
                                        "bootstrap_port + g); expected a lower port");
      continue;
    }
    for (uint32_t g = 0; g < i.dp; ++g) {
      out.push_back(group_of(i, g));
      groups[i.name].push_back(out.back().name);
    }
  }
  if (out.size() > max_instances) {
    r.fail(1, "the DP groups make " + std::to_string(out.size()) + " instances; expected at most " +
                  std::to_string(max_instances));
    return;
  }
  std::set<std::string> names;
  for (auto& i : out)
    if (!names.insert(i.name).second)
      r.fail(i.line, "instance name " + in_quotes(i.name) +
                         " is taken twice (a DP group of an instance split with dp is named "
                         "<name>/dp<g>); expected another name");
  for (auto& i : out) {
    std::vector<std::string> prefills;
    if (i.role == instance_role::decode && i.prefills.empty() && groups.count(implied))
      i.prefills.push_back(implied);
    for (auto& p : i.prefills)
      if (auto g = groups.find(p); g != groups.end())
        prefills.insert(prefills.end(), g->second.begin(), g->second.end());
      else
        prefills.push_back(p);
    i.prefills = std::move(prefills);
  }
  c.instances = std::move(out);
}

}  // namespace kvferry::launch::toml_reading
