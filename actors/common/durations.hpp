// Durations as the logs and failure causes word them.
#pragma once

#include <chrono>
#include <string>

namespace kvferry {

/// "300s", "1.5s", "250ms", "40us".
std::string format_duration(std::chrono::nanoseconds d);

}  // namespace kvferry
