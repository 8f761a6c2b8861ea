#include "apps/common/cluster_spec.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace kvferry::launch {

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

}  // namespace kvferry::launch
