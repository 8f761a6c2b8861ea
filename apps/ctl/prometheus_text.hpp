// A strict reader of Prometheus' text exposition format (0.0.4): kvferry-ctl
// top reads each node's /metrics with it, and the tests check every
// exposition against its rules, those a scraper relies on.
//   - every line ends with '\n'; comments are "# HELP NAME TEXT" or
//     "# TYPE NAME TYPE" (counter, gauge, histogram, summary, untyped);
//   - one TYPE per family, before its samples; a family's samples together;
//   - metric and label names match Prometheus' patterns; label values are
//     quoted with \\, \" and \n escapes; a value is a number, +Inf, -Inf or NaN;
//   - no series twice;
//   - a histogram's buckets carry le, are cumulative and end with +Inf,
//     which equals its _count; a counter is not negative.
// parse() throws std::runtime_error naming the line and the rule.
#pragma once

#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace kvferry::prom {

struct prom_sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct prom_exposition {
  std::map<std::string, std::string> types;  // family → type
  std::vector<prom_sample> samples;

  /// The sum of the samples named `name` whose labels include `match`.
  double sum(const std::string& name, const std::map<std::string, std::string>& match = {}) const {
    double total = 0;
    for (auto& s : samples) {
      if (s.name != name)
        continue;
      bool ok = true;
      for (auto& [k, v] : match) {
        auto i = s.labels.find(k);
        ok &= i != s.labels.end() && i->second == v;
      }
      if (ok)
        total += s.value;
    }
    return total;
  }
  /// How many samples are named `name`.
  size_t count(const std::string& name) const {
    size_t n = 0;
    for (auto& s : samples)
      n += s.name == name;
    return n;
  }
};

namespace detail {

inline bool name_char(char c, bool first, bool colon) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':') ||
         (!first && c >= '0' && c <= '9');
}

inline std::string read_name(const std::string& s, size_t& i, bool colon) {
  size_t start = i;
  while (i < s.size() && name_char(s[i], i == start, colon))
    ++i;
  return s.substr(start, i - start);
}

/// The family a sample belongs to, given the TYPEs seen.
inline std::string family_of(const std::string& name,
                             const std::map<std::string, std::string>& types) {
  for (auto suffix : {"_bucket", "_sum", "_count"}) {
    std::string sfx{suffix};
    if (name.size() > sfx.size() && name.compare(name.size() - sfx.size(), sfx.size(), sfx) == 0) {
      auto base = name.substr(0, name.size() - sfx.size());
      auto t = types.find(base);
      if (t != types.end() && (t->second == "histogram" || t->second == "summary"))
        return base;
    }
  }
  return name;
}

}  // namespace detail

inline prom_exposition parse_prometheus(const std::string& text) {
  prom_exposition out;
  if (!text.empty() && text.back() != '\n')
    throw std::runtime_error("the exposition does not end with a newline");
  std::set<std::string> series;
  std::set<std::string> closed;  // families whose samples ended
  std::string current;           // family of the samples being read
  size_t line_no = 0;
  size_t pos = 0;
  auto fail = [&](const std::string& why, const std::string& line) {
    throw std::runtime_error("line " + std::to_string(line_no) + " \"" + line + "\": " + why);
  };
  while (pos < text.size()) {
    auto nl = text.find('\n', pos);
    auto line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    if (line.empty())
      continue;
    if (line[0] == '#') {
      if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) {
        size_t i = 7;
        auto name = detail::read_name(line, i, true);
        if (name.empty() || i >= line.size() || line[i] != ' ')
          fail("expected a metric name and a space", line);
        if (line[2] == 'T') {
          auto type = line.substr(i + 1);
          static const std::set<std::string> known{"counter", "gauge", "histogram", "summary",
                                                   "untyped"};
          if (!known.count(type))
            fail("unknown TYPE " + type, line);
          if (out.types.count(name))
            fail("a second TYPE for " + name, line);
          if (closed.count(name) || current == name)
            fail("TYPE after samples of " + name, line);
          out.types[name] = type;
        }
      }
      continue;
    }
    size_t i = 0;
    prom_sample s;
    s.name = detail::read_name(line, i, true);
    if (s.name.empty())
      fail("expected a metric name", line);
    std::string key = s.name + "{";
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        auto label = detail::read_name(line, i, false);
        if (label.empty() || i + 1 >= line.size() || line[i] != '=' || line[i + 1] != '"')
          fail("expected label=\"value\"", line);
        i += 2;
        std::string value;
        while (i < line.size() && line[i] != '"') {
          if (line[i] == '\\') {
            if (i + 1 >= line.size())
              fail("a lone backslash", line);
            char e = line[i + 1];
            if (e == 'n')
              value += '\n';
            else if (e == '\\' || e == '"')
              value += e;
            else
              fail(std::string{"unknown escape \\"} + e, line);
            i += 2;
          } else {
            value += line[i++];
          }
        }
        if (i >= line.size())
          fail("an unterminated label value", line);
        ++i;  // the closing quote
        if (s.labels.count(label))
          fail("label " + label + " twice", line);
        s.labels[label] = value;
        if (i < line.size() && line[i] == ',')
          ++i;
      }
      if (i >= line.size())
        fail("expected }", line);
      ++i;
    }
    for (auto& [k, v] : s.labels)
      key += k + "=" + v + ",";
    if (i >= line.size() || line[i] != ' ')
      fail("expected a space before the value", line);
    auto rest = line.substr(i + 1);
    auto sp = rest.find(' ');
    auto value = rest.substr(0, sp);
    if (value == "+Inf") {
      s.value = INFINITY;
    } else if (value == "-Inf") {
      s.value = -INFINITY;
    } else if (value == "NaN") {
      s.value = NAN;
    } else {
      char* end = nullptr;
      s.value = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0')
        fail("a value that is not a number: " + value, line);
    }
    if (!series.insert(key).second)
      fail("the same series twice", line);
    auto family = detail::family_of(s.name, out.types);
    if (family != current) {
      if (closed.count(family))
        fail("samples of " + family + " apart from the others", line);
      if (!current.empty())
        closed.insert(current);
      current = family;
    }
    auto t = out.types.find(family);
    if (t != out.types.end() && t->second == "counter" && s.value < 0)
      fail("a negative counter", line);
    if (t != out.types.end() && t->second == "histogram" && s.name == family + "_bucket" &&
        !s.labels.count("le"))
      fail("a bucket without le", line);
    out.samples.push_back(std::move(s));
  }
  // Histograms: cumulative buckets, +Inf last and equal to _count.
  for (auto& [family, type] : out.types) {
    if (type != "histogram")
      continue;
    std::map<std::string, std::vector<std::pair<double, double>>> buckets;  // by labels sans le
    std::map<std::string, double> counts;
    for (auto& s : out.samples) {
      auto rest = s.labels;
      rest.erase("le");
      std::string k;
      for (auto& [a, b] : rest)
        k += a + "=" + b + ",";
      if (s.name == family + "_bucket") {
        auto le = s.labels.at("le");
        buckets[k].emplace_back(le == "+Inf" ? INFINITY : std::strtod(le.c_str(), nullptr),
                                s.value);
      } else if (s.name == family + "_count") {
        counts[k] = s.value;
      }
    }
    for (auto& [k, b] : buckets) {
      for (size_t j = 1; j < b.size(); ++j)
        if (b[j].first <= b[j - 1].first || b[j].second < b[j - 1].second)
          throw std::runtime_error(family + "{" + k + "}: buckets not in order or not cumulative");
      if (b.empty() || !std::isinf(b.back().first))
        throw std::runtime_error(family + "{" + k + "}: no +Inf bucket last");
      if (!counts.count(k) || counts[k] != b.back().second)
        throw std::runtime_error(family + "{" + k + "}: the +Inf bucket is not _count");
    }
  }
  return out;
}

}  // namespace kvferry::prom
