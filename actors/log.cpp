#include "actors/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace kvferry {

spdlog::logger& log() {
  static auto logger = [] {
    auto l = spdlog::get("kvferry");
    if (!l) {
      l = spdlog::stderr_color_mt("kvferry");
      l->set_pattern("%H:%M:%S.%e %^%l%$ kvferry %v");
      l->set_level(spdlog::level::warn);
    }
    return l;
  }();
  return *logger;
}

void set_log_level(std::string_view level) {
  log().set_level(spdlog::level::from_str(std::string{level}));
}

}  // namespace kvferry
