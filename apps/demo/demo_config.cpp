// kvferry-demo's options turned into the run (demo_config.hpp).
#include "apps/demo/demo_config.hpp"

#include <cstdlib>
#include <iostream>
#include <sstream>

#include "messages/wall_clock.hpp"

namespace kvferry::demo {

/// The epoch a harness wrote: a positive decimal number of nanoseconds.
bool parse_epoch(const std::string& line, int64_t& out) {
  try {
    size_t used = 0;
    auto v = std::stoll(line, &used);
    if (used != line.size() || v <= 0)
      return false;
    out = v;
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

/// The run's workload; `epoch_ns` is --epoch-ns, or what stdin said.
workload workload_of(const demo_config& cfg, int64_t epoch_ns) {
  workload w;
  w.seed = cfg.seed;
  w.rooms = cfg.rooms;
  w.min_tokens = cfg.min_tokens;
  w.max_tokens = cfg.max_tokens;
  w.chunk_pages = cfg.chunk_pages;
  w.concurrency = cfg.concurrency;
  w.epoch_ns = epoch_ns;
  w.interval_us = cfg.interval_us;
  w.record_conclusions = cfg.print_conclusions;
  if (cfg.print_conclusions) {
    // A live line once this process saw its first room succeed on every
    // rank: a harness that strikes mid-run waits for it, so that its fault
    // lands while rooms move, however slowly the processes started.
    w.progress_period = std::chrono::milliseconds{20};
    w.on_progress = [said = false](const run_report& r) mutable {
      if (said || r.success == 0)
        return;
      said = true;
      std::cout << "first success " << wall_ns() << std::endl;
    };
  }
  if (cfg.follow_requests) {
    // A rank that came back joins the rooms decode still asks for; a room
    // decode gave up on while it was away is never opened here to wait out
    // its Bootstrapping deadline alone (scheduler_driver.hpp).
    w.follow_requests = true;
    if (cfg.interval_us > 0 && epoch_ns != 0)
      w.serve_until_ns = epoch_ns + int64_t{cfg.rooms} * cfg.interval_us * 1000 + 3'000'000'000;
  }
  return w;
}

/// The rank indices of --ranks, or every index below `count`; nullopt (with
/// the reason printed) for a list that names no rank of the instance.
std::optional<std::set<uint32_t>> ranks_to_host(const demo_config& cfg, uint32_t count) {
  std::set<uint32_t> out;
  if (cfg.ranks.empty()) {
    for (uint32_t i = 0; i < count; ++i)
      out.insert(i);
    return out;
  }
  std::stringstream in{cfg.ranks};
  for (std::string item; std::getline(in, item, ',');) {
    char* end = nullptr;
    auto v = std::strtoul(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v >= count) {
      std::cerr << "kvferry-demo: --ranks=" << cfg.ranks << ": \"" << item
                << "\" is not a rank index; expected numbers below " << count
                << " (tp + pp * tp-size), separated by commas\n";
      return std::nullopt;
    }
    out.insert(static_cast<uint32_t>(v));
  }
  return out;
}

/// Reads the epoch from stdin (--epoch-from-stdin) into `w`; false with the
/// reason printed.
bool await_epoch(const demo_config& cfg, workload& w) {
  std::string line;
  int64_t epoch = 0;
  if (!std::getline(std::cin, line) || !parse_epoch(line, epoch)) {
    std::cerr << "kvferry-demo: --epoch-from-stdin read \"" << line
              << "\", expected the epoch in nanoseconds since 1970\n";
    return false;
  }
  w = workload_of(cfg, epoch);
  return true;
}

}  // namespace kvferry::demo
