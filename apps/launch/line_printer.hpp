// The lines a node process prints from its drivers' threads and relays from
// its per-rank children: each line whole (one write), so that neither another
// thread's line nor a log line lands inside it.
#pragma once

#include <iostream>
#include <mutex>
#include <ostream>
#include <string>

#include "apps/common/whole_lines.hpp"

namespace kvferry::launch {

/// Prints whole lines to `out` (stdout: one write each).
struct printer {
  std::ostream& out;
  inline void line(const std::string& text) {
    if (&out == &std::cout) {
      out.flush();
      apps::say(text);
      return;
    }
    static std::mutex mu;  // another stream (a test's): serialized, as one text
    std::lock_guard<std::mutex> guard{mu};
    out << text << std::endl;
  }
};

}  // namespace kvferry::launch
