#include "actors/base/log_json.hpp"

#include <charconv>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <set>

#include "messages/failure.hpp"

namespace kvferry {

namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

bool is_word_char(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

/// "tp3" with prefix "tp": true when `s` is the prefix and one or more digits.
bool prefixed_number(std::string_view s, std::string_view prefix) {
  if (s.size() <= prefix.size() || s.substr(0, prefix.size()) != prefix)
    return false;
  for (auto c : s.substr(prefix.size()))
    if (!is_digit(c))
      return false;
  return true;
}

/// "prefill-0 tp0 pp0" (to_string of a rank_ref that names one rank).
bool is_rank(std::string_view s) {
  auto a = s.find(' ');
  if (a == 0 || a == std::string_view::npos)
    return false;
  auto b = s.find(' ', a + 1);
  if (b == std::string_view::npos || s.find(' ', b + 1) != std::string_view::npos)
    return false;
  return prefixed_number(s.substr(a + 1, b - a - 1), "tp") &&
         prefixed_number(s.substr(b + 1), "pp");
}

void set_rank(log_fields& f, std::string_view rank) {
  f.rank = std::string{rank};
  f.instance = std::string{rank.substr(0, rank.find(' '))};
}

/// A leading "[...]": a rank, or "[ACTOR NAME]" for the actors that name
/// themselves so. Anything else is left to the message.
void read_bracket(log_fields& f, std::string_view inside) {
  if (is_rank(inside)) {
    set_rank(f, inside);
    return;
  }
  auto sp = inside.find(' ');
  if (sp == std::string_view::npos || sp + 1 == inside.size())
    return;
  auto word = inside.substr(0, sp);
  auto rest = inside.substr(sp + 1);
  if (word == "instance") {
    if (rest.find(' ') == std::string_view::npos)
      f.instance = std::string{rest};
    return;
  }
  if (word == "status") {
    if (rest.find(' ') == std::string_view::npos) {
      f.actor = "status";
      f.node = std::string{rest};
    }
    return;
  }
  if (word != "decider" && word != "bootstrap" && word != "gateway")
    return;
  if (is_rank(rest)) {
    f.actor = std::string{word};
    set_rank(f, rest);
  } else if (rest.find(' ') == std::string_view::npos) {
    f.actor = std::string{word};
    f.instance = std::string{rest};
  }
}

/// A bare leading "NAME tpN ppM" (followed by the end, a space or a ':' / ',').
void read_bare_rank(log_fields& f, std::string_view msg) {
  size_t end = 0;
  for (int spaces = 0; end < msg.size(); ++end)
    if (msg[end] == ' ' && ++spaces == 3)
      break;
  auto head = msg.substr(0, end);
  if (!head.empty() && (head.back() == ':' || head.back() == ','))
    head.remove_suffix(1);
  if (is_rank(head))
    set_rank(f, head);
}

/// Reads the digits at `at` into `out`; the position after them, or npos.
size_t read_number(std::string_view s, size_t at, uint64_t& out) {
  auto first = s.data() + at;
  auto last = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(first, last, out);
  if (ec != std::errc{} || ptr == first)
    return std::string_view::npos;
  return static_cast<size_t>(ptr - s.data());
}

/// The first "room N" or "room N#G" that stands as words of its own.
void read_room(log_fields& f, std::string_view msg) {
  constexpr std::string_view tag = "room ";
  for (auto at = msg.find(tag); at != std::string_view::npos; at = msg.find(tag, at + 1)) {
    if (at > 0 && is_word_char(msg[at - 1]))
      continue;
    auto p = at + tag.size();
    if (p >= msg.size() || !is_digit(msg[p]))
      continue;
    uint64_t room = 0;
    uint64_t generation = 0;
    auto q = read_number(msg, p, room);
    if (q == std::string_view::npos)
      continue;
    bool has_generation = false;
    if (q < msg.size() && msg[q] == '#') {
      auto r = q + 1 < msg.size() && is_digit(msg[q + 1]) ? read_number(msg, q + 1, generation)
                                                          : std::string_view::npos;
      if (r == std::string_view::npos)
        continue;
      has_generation = true;
      q = r;
    }
    if (q < msg.size() && is_word_char(msg[q]))
      continue;
    f.room = room;
    if (has_generation)
      f.generation = generation;
    return;
  }
}

/// The first "Failed: " / "failed: " that starts a word.
size_t find_failed(std::string_view msg) {
  constexpr std::string_view tag = "ailed: ";
  for (auto at = msg.find(tag); at != std::string_view::npos; at = msg.find(tag, at + 1)) {
    if (at == 0 || (msg[at - 1] != 'F' && msg[at - 1] != 'f'))
      continue;
    if (at >= 2 && is_word_char(msg[at - 2]))
      continue;
    return at + tag.size();
  }
  return std::string_view::npos;
}

/// A failure rendering: "CODE: CAUSE (from ORIGIN)" (see to_string(failure)).
void read_cause(log_fields& f, std::string_view msg) {
  auto at = find_failed(msg);
  if (at == std::string_view::npos || at == msg.size())
    return;
  auto cause = msg.substr(at);
  f.cause = std::string{cause};
  auto code = cause.substr(0, cause.find(": "));
  if (is_failure_code(code))
    f.code = std::string{code};
  while (!cause.empty() && (cause.back() == ' ' || cause.back() == '\n' || cause.back() == '\r'))
    cause.remove_suffix(1);
  constexpr std::string_view from = "(from ";
  auto p = cause.rfind(from);
  if (cause.empty() || cause.back() != ')' || p == std::string_view::npos)
    return;
  auto origin = cause.substr(p + from.size(), cause.size() - 1 - p - from.size());
  if (!origin.empty() && origin.find_first_of("()") == std::string_view::npos)
    f.origin = std::string{origin};
}

std::string_view level_name(spdlog::level::level_enum l) {
  switch (l) {
    case spdlog::level::trace:
      return "trace";
    case spdlog::level::debug:
      return "debug";
    case spdlog::level::info:
      return "info";
    case spdlog::level::warn:
      return "warn";
    case spdlog::level::err:
      return "error";
    case spdlog::level::critical:
      return "critical";
    default:
      return "off";
  }
}

/// "2026-12-02T11:33:19.123456Z" (UTC, microseconds).
void append_timestamp(std::string& out, spdlog::log_clock::time_point t) {
  using namespace std::chrono;
  auto since = t.time_since_epoch();
  auto secs = duration_cast<seconds>(since);
  auto us = duration_cast<microseconds>(since - secs).count();
  if (us < 0) {
    secs -= seconds{1};
    us += 1000000;
  }
  std::time_t tt = static_cast<std::time_t>(secs.count());
  std::tm tm{};
  ::gmtime_r(&tt, &tm);
  char buf[48];
  auto n = std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ",
                         tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                         tm.tm_sec, static_cast<long long>(us));
  if (n > 0)
    out.append(buf, static_cast<size_t>(n) < sizeof buf ? static_cast<size_t>(n) : sizeof buf - 1);
}

void append_string_field(std::string& out, std::string_view key, std::string_view value) {
  out += ",\"";
  out += key;
  out += "\":\"";
  append_json_escaped(out, value);
  out += '"';
}

void append_number_field(std::string& out, std::string_view key, uint64_t value) {
  out += ",\"";
  out += key;
  out += "\":";
  out += std::to_string(value);
}

}  // namespace

bool is_failure_code(std::string_view code) {
  static const std::set<std::string, std::less<>> codes = [] {
    std::set<std::string, std::less<>> out;
    for (int i = 1; i <= 255; ++i) {
      auto name = to_string(static_cast<errc>(i));
      if (name.rfind("errc(", 0) != 0)
        out.insert(std::move(name));
    }
    return out;
  }();
  return codes.find(code) != codes.end();
}

log_fields read_log_fields(std::string_view msg) {
  log_fields f;
  if (!msg.empty() && msg.front() == '[') {
    auto close = msg.find(']');
    if (close != std::string_view::npos)
      read_bracket(f, msg.substr(1, close - 1));
  } else {
    read_bare_rank(f, msg);
  }
  read_room(f, msg);
  read_cause(f, msg);
  return f;
}

void append_json_escaped(std::string& out, std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      out += "\\u00";
      out += hex[u >> 4];
      out += hex[u & 0xf];
    } else {
      out += c;
    }
  }
}

void json_log_formatter::format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) {
  std::string_view text{msg.payload.data(), msg.payload.size()};
  std::string out;
  out.reserve(text.size() + 160);
  out += "{\"ts\":\"";
  append_timestamp(out, msg.time);
  out += '"';
  append_string_field(out, "level", level_name(msg.level));
  append_string_field(out, "logger", {msg.logger_name.data(), msg.logger_name.size()});
  append_string_field(out, "msg", text);
  auto f = read_log_fields(text);
  if (!f.rank.empty())
    append_string_field(out, "rank", f.rank);
  if (!f.instance.empty())
    append_string_field(out, "instance", f.instance);
  if (!f.actor.empty())
    append_string_field(out, "actor", f.actor);
  if (!f.node.empty())
    append_string_field(out, "node", f.node);
  if (f.room)
    append_number_field(out, "room", *f.room);
  if (f.generation)
    append_number_field(out, "generation", *f.generation);
  if (!f.cause.empty())
    append_string_field(out, "cause", f.cause);
  if (!f.code.empty())
    append_string_field(out, "code", f.code);
  if (!f.origin.empty())
    append_string_field(out, "origin", f.origin);
  out += "}\n";
  dest.append(out.data(), out.data() + out.size());
}

std::unique_ptr<spdlog::formatter> json_log_formatter::clone() const {
  return std::make_unique<json_log_formatter>();
}

std::string relayed_line(std::string_view via, std::string_view line) {
  constexpr std::string_view relayed = "{\"via\":\"";
  std::string out;
  if (line.starts_with(relayed)) {
    out = relayed;
    append_json_escaped(out, via);
    out += '/';
    out += line.substr(relayed.size());
  } else if (line.starts_with("{\"")) {
    out = relayed;
    append_json_escaped(out, via);
    out += "\",";
    out += line.substr(1);
  } else {
    out = "[";
    out += via;
    out += "] ";
    out += line;
  }
  return out;
}

}  // namespace kvferry
