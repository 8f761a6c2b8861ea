// The synthetic workload's arithmetic and the report's text
// (scheduler_driver.hpp declares both).
#include <algorithm>
#include <random>
#include <sstream>

#include "apps/common/scheduler_driver.hpp"

namespace kvferry::apps {

uint32_t workload::tokens_of(uint64_t room) const {
  std::mt19937_64 rng(seed ^ (room * 0x9e3779b97f4a7c15ull));
  std::uniform_int_distribution<uint32_t> d(min_tokens, std::max(min_tokens, max_tokens));
  return d(rng);
}

uint32_t workload::pages_of(uint64_t room, uint32_t page_size) const {
  return (tokens_of(room) + page_size - 1) / page_size;
}

std::string run_report::to_text(const std::string& side) const {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(3);
  os << side << ": " << rooms << " requests on " << ranks << (ranks == 1 ? " rank, " : " ranks, ")
     << success << " Success, " << failed << " Failed";
  if (skipped > 0)
    os << ", " << skipped << " skipped (their time passed before the start)";
  if (rerouted > 0)
    os << ", " << rerouted
       << (side_prefill ? " not opened (this instance was dead; routed elsewhere)"
                        : " re-routed (their prefill instance was down)");
  if (served_for_others > 0)
    os << ", " << served_for_others << " re-routed here";
  if (verified + corrupted > 0)
    os << ", " << verified << " verified byte for byte, " << corrupted << " corrupted";
  os << ", " << disagreements << " disagreements";
  os << "\n" << side << ": " << bytes << " bytes in " << seconds << " s = " << gbps() << " GB/s";
  if (!latencies_us.empty()) {
    auto l = latencies_us;
    std::sort(l.begin(), l.end());
    os << ", room latency p50 " << l[l.size() / 2] / 1000.0 << " ms p99 "
       << l[std::min(l.size() - 1, l.size() * 99 / 100)] / 1000.0 << " ms";
  }
  os << "\n" << side << ": states reached:";
  for (auto s : {kv_poll::bootstrapping, kv_poll::waiting_for_input, kv_poll::transferring,
                 kv_poll::success, kv_poll::failed}) {
    auto i = states_seen.find(to_string(s));
    os << " " << to_string(s) << "=" << (i == states_seen.end() ? 0 : i->second);
  }
  for (auto& [code, n] : failures)
    os << "\n" << side << ": failed with " << code << ": " << n;
  for (auto& e : first_errors)
    os << "\n" << side << ":   " << e;
  return os.str();
}

run_report merged(const std::vector<run_report>& parts) {
  run_report out;
  out.ranks = 0;
  for (auto& p : parts) {
    out.rooms += p.rooms;
    out.ranks += p.ranks;
    out.success += p.success;
    out.failed += p.failed;
    out.verified += p.verified;
    out.corrupted += p.corrupted;
    out.disagreements += p.disagreements;
    out.bytes += p.bytes;
    out.seconds = std::max(out.seconds, p.seconds);
    for (auto& [state, n] : p.states_seen)
      out.states_seen[state] += n;
    for (auto& [code, n] : p.failures)
      out.failures[code] += n;
    for (auto& e : p.first_errors)
      if (out.first_errors.size() < 5)
        out.first_errors.push_back(e);
    out.latencies_us.insert(out.latencies_us.end(), p.latencies_us.begin(), p.latencies_us.end());
    out.skipped += p.skipped;
    out.opened += p.opened;
    out.rerouted += p.rerouted;
    out.served_for_others += p.served_for_others;
    for (auto& [state, n] : p.now)
      out.now[state] += n;
    out.side_prefill = p.side_prefill;
  }
  if (parts.empty())
    out.ranks = 1;
  return out;
}

}  // namespace kvferry::apps
