// kvferry's logger (spdlog). Lines that concern a room or a rank name them:
//   [prefill-0 tp0 pp0] room 42#7: chunk 3 landed (16 pages)
// As text (the default) or as JSON lines (actors/base/log_json.hpp), one object per
// line with the rank, room and failure read from the text.
#pragma once

#include <optional>
#include <string_view>

#include <spdlog/spdlog.h>

namespace kvferry {

/// The "kvferry" logger, created on first use (stderr, colour when a tty). Its
/// level is warn, or KVFERRY_LOG_LEVEL from the environment; its format text,
/// or KVFERRY_LOG_FORMAT (text or json) from the environment.
spdlog::logger& log();

/// Sets the level by name (trace, debug, info, warn, error, critical, off),
/// unless KVFERRY_LOG_LEVEL is set: the environment wins.
void set_log_level(std::string_view level);

/// How log lines are written: "HH:MM:SS.mmm level kvferry MESSAGE", or one
/// JSON object per line (for log shippers).
enum class log_format { text, json };

/// "text" or "json"; nullopt for anything else.
std::optional<log_format> log_format_from(std::string_view name);

/// Sets the format, unless KVFERRY_LOG_FORMAT names one: the environment wins.
void set_log_format(log_format format);

}  // namespace kvferry
