// kvferry's logger (spdlog). Lines that concern a room or a rank name them:
//   [prefill-0 tp0 pp0] room 42#7: chunk 3 landed (16 pages)
#pragma once

#include <string_view>

#include <spdlog/spdlog.h>

namespace kvferry {

/// The "kvferry" logger, created on first use (stderr, colour when a tty). Its
/// level is warn, or KVFERRY_LOG_LEVEL from the environment.
spdlog::logger& log();

/// Sets the level by name (trace, debug, info, warn, error, critical, off),
/// unless KVFERRY_LOG_LEVEL is set: the environment wins.
void set_log_level(std::string_view level);

}  // namespace kvferry
