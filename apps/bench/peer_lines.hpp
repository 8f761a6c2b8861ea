// Reading what a bench's peer process prints: its ready line with the port
// of its bootstrap, "key=value" figures, and the fixed-shape JSON lines of
// the peer script (apps/bench/peer_transfer.py).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "apps/common/child_process.hpp"

namespace kvferry::bench {

/// Waits up to a minute for `peer`'s "ready ... bootstrap=PORT" line and
/// returns PORT; throws, with what `peer` printed, when it does not come.
uint16_t await_bootstrap_port(apps::child_process& peer, const std::string& who);

/// The number after "key=" in `line`; throws naming the key when absent.
double number_after(const std::string& line, const std::string& key);

/// One number or string of a JSON line of the peer script's fixed shape
/// (`"key": value`), or nullopt.
std::optional<double> json_number(const std::string& line, const std::string& key);
std::optional<std::string> json_text(const std::string& line, const std::string& key);

}  // namespace kvferry::bench
