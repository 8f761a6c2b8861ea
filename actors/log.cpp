#include "actors/log.hpp"

#include <cstdlib>

#include <spdlog/sinks/stdout_color_sinks.h>

namespace kvferry {

spdlog::logger& log() {
  static auto logger = [] {
    auto l = spdlog::get("kvferry");
    if (!l) {
      l = spdlog::stderr_color_mt("kvferry");
      l->set_pattern("%H:%M:%S.%e %^%l%$ kvferry %v");
      // KVFERRY_LOG_LEVEL overrides the default (warn) for every binary.
      auto* env = std::getenv("KVFERRY_LOG_LEVEL");
      l->set_level(env ? spdlog::level::from_str(env) : spdlog::level::warn);
    }
    return l;
  }();
  return *logger;
}

void set_log_level(std::string_view level) {
  if (std::getenv("KVFERRY_LOG_LEVEL") == nullptr)
    log().set_level(spdlog::level::from_str(std::string{level}));
}

}  // namespace kvferry
