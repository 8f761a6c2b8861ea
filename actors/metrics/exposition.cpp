#include "actors/metrics/exposition.hpp"

#include <map>
#include <set>

namespace kvferry::metrics {

namespace {

/// HELP text escapes backslash and newline.
std::string help_text(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

/// The series a sample line names: everything before its value.
std::string series_of(const std::string& line) {
  auto sp = line.rfind(' ');
  return sp == std::string::npos ? line : line.substr(0, sp);
}

}  // namespace

std::vector<metric_family> merge(const std::vector<std::vector<metric_family>>& parts) {
  std::map<std::string, metric_family> by_name;
  std::map<std::string, std::set<std::string>> seen;  // series given, per family
  for (auto& part : parts)
    for (auto& f : part) {
      auto [i, fresh] = by_name.try_emplace(f.name, metric_family{f.name, f.help, f.type, {}});
      if (!fresh && i->second.type != f.type)
        continue;
      auto& have = seen[f.name];
      for (auto& s : f.samples)
        if (have.insert(series_of(s)).second)
          i->second.samples.push_back(s);
    }
  std::vector<metric_family> out;
  for (auto& [name, f] : by_name)
    out.push_back(std::move(f));
  return out;
}

std::string render(const std::vector<metric_family>& families) {
  std::string out;
  for (auto& f : families) {
    out += "# HELP " + f.name + " " + help_text(f.help) + "\n";
    out += "# TYPE " + f.name + " " + f.type + "\n";
    for (auto& s : f.samples) {
      out += s;
      out += '\n';
    }
  }
  return out;
}

}  // namespace kvferry::metrics
