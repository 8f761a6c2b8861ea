// Typed values out of toml++ tables for the cluster file's reader and its
// checks: every error is recorded as "FILE:LINE: reason", naming the key, the
// value and what was expected. Internal to apps/common/cluster_*.cpp.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

#include "apps/common/cluster_spec.hpp"

namespace kvferry::launch::toml_reading {

using keys = std::vector<std::string_view>;

inline std::string join(const keys& ks) {
  std::string out;
  for (auto k : ks)
    out += (out.empty() ? "" : ", ") + std::string{k};
  return out;
}

inline std::string type_name(const toml::node& n) {
  std::ostringstream os;
  os << n.type();
  return os.str();
}

inline std::string in_quotes(std::string_view s) {
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

}  // namespace kvferry::launch::toml_reading
