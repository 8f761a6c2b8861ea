// JSON lines for kvferry's logger (KVFERRY_LOG_FORMAT=json, --log-format=json):
// one object per event and line, for log shippers. What the house convention
// puts in the text is lifted into fields of its own:
//   [decode-1 tp1 pp0] room 42#7: Failed: deadline: ... (from decode-0 tp0 pp0)
// gives
//   {"ts":"2026-12-02T11:33:19.123456Z","level":"warn","logger":"kvferry",
//    "msg":"[decode-1 tp1 pp0] room 42#7: Failed: deadline: ...",
//    "rank":"decode-1 tp1 pp0","instance":"decode-1","room":42,"generation":7,
//    "cause":"deadline: ... (from decode-0 tp0 pp0)","code":"deadline",
//    "origin":"decode-0 tp0 pp0"}
// (on one line). A field the message does not name is left out.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <spdlog/formatter.h>

namespace kvferry {

/// What a log message says of its rank, room and failure, read from the text.
struct log_fields {
  std::string rank;              ///< "prefill-0 tp0 pp0": a leading "[RANK]" (or bare "RANK ")
  std::string instance;          ///< "prefill-0": the rank's instance, or "[decider NAME]"'s NAME
  std::string actor;             ///< "decider", "bootstrap", "status": a leading "[ACTOR NAME]"
  std::string node;              ///< "[status NODE]"'s NODE
  std::optional<uint64_t> room;  ///< the first "room N" or "room N#G"
  std::optional<uint64_t> generation;  ///< its G (absent for an unbound "room N")
  std::string cause;                   ///< what follows "Failed: " or "failed: ", as written
  std::string code;                    ///< the cause's leading failure code, when it is a known one
  std::string origin;                  ///< the cause's trailing "(from RANK)"
};

/// Reads the fields of `msg` (house convention, see actors/base/log.hpp).
log_fields read_log_fields(std::string_view msg);

/// True when `code` is the name of a failure code (to_string(errc), not none).
bool is_failure_code(std::string_view code);

/// Appends `s` to `out` as a JSON string body: quotes and backslashes
/// escaped, control characters as \u00XX, other bytes (UTF-8) as they are.
void append_json_escaped(std::string& out, std::string_view s);

/// A line of a child process as its parent relays it, naming the child
/// `via` ("decode-node", "decode-0/1"): a JSON log line stays one JSON
/// object, with "via" as its first field ("node/rank" when relayed twice);
/// any other line gets "[via] " in front.
std::string relayed_line(std::string_view via, std::string_view line);

/// The spdlog formatter that writes one JSON object per line.
class json_log_formatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override;
  std::unique_ptr<spdlog::formatter> clone() const override;
};

}  // namespace kvferry
