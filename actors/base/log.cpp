#include "actors/base/log.hpp"

#include <cstdlib>
#include <memory>

#include <spdlog/sinks/stdout_color_sinks.h>

#include "actors/base/log_json.hpp"

namespace kvferry {

namespace {

constexpr const char* text_pattern = "%H:%M:%S.%e %^%l%$ kvferry %v";

void apply(spdlog::logger& l, log_format format) {
  if (format == log_format::json)
    l.set_formatter(std::make_unique<json_log_formatter>());
  else
    l.set_pattern(text_pattern);
}

/// KVFERRY_LOG_FORMAT, when it names a format.
std::optional<log_format> env_format() {
  auto* env = std::getenv("KVFERRY_LOG_FORMAT");
  return env ? log_format_from(env) : std::nullopt;
}

}  // namespace

spdlog::logger& log() {
  static auto logger = [] {
    auto l = spdlog::get("kvferry");
    if (!l) {
      l = spdlog::stderr_color_mt("kvferry");
      l->set_pattern(text_pattern);
      // KVFERRY_LOG_LEVEL overrides the default (warn) for every binary.
      auto* env = std::getenv("KVFERRY_LOG_LEVEL");
      l->set_level(env ? spdlog::level::from_str(env) : spdlog::level::warn);
      // KVFERRY_LOG_FORMAT likewise (text by default).
      if (env_format() == log_format::json)
        apply(*l, log_format::json);
      else if (auto* f = std::getenv("KVFERRY_LOG_FORMAT"); f && !log_format_from(f))
        l->warn("KVFERRY_LOG_FORMAT={} is not a log format (expected text or json): ignored", f);
    }
    return l;
  }();
  return *logger;
}

void set_log_level(std::string_view level) {
  if (std::getenv("KVFERRY_LOG_LEVEL") == nullptr)
    log().set_level(spdlog::level::from_str(std::string{level}));
}

std::optional<log_format> log_format_from(std::string_view name) {
  if (name == "text")
    return log_format::text;
  if (name == "json")
    return log_format::json;
  return std::nullopt;
}

void set_log_format(log_format format) {
  if (!env_format())
    apply(log(), format);
}

}  // namespace kvferry
