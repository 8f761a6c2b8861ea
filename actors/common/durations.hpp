// Durations as the logs, the failure causes and the cluster file word them
// (apps/launch/cluster_file's parse_duration reads them back).
#pragma once

#include <chrono>
#include <string>

namespace kvferry {

/// In the largest unit the value has at least one of (s, ms, us, ns; min when
/// whole), with up to three decimals, trailing zeros trimmed: "5min", "90s",
/// "1.5s", "250ms", "40us", "1.234s".
std::string format_duration(std::chrono::nanoseconds d);

}  // namespace kvferry
