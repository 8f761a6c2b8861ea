// A rank's figures for Prometheus: rooms concluded by outcome, rooms in
// flight by state, failures by code and origin, how long rooms took, and the
// rooms failed at once because their peer was known down. The rank actor
// calls moved() each time it publishes a room whose state changed (one
// thread); the series are the registry's, labelled with the rank
// (kv_instance, role, tp, pp). Plain logic, no CAF.
//
// Rooms still in flight when the rank goes are taken off the in-flight
// gauges by the destructor, so a rank that stopped counts none.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "actors/metrics/registry.hpp"
#include "messages/failure.hpp"
#include "messages/ids.hpp"
#include "messages/kv_poll.hpp"

namespace kvferry::metrics {

/// kv_instance, role, tp and pp of `rank` (a rank's own series start so).
label_set rank_labels(const rank_ref& rank);

class rank_figures {
 public:
  rank_figures(std::shared_ptr<registry> reg, const rank_ref& rank);
  ~rank_figures();
  rank_figures(const rank_figures&) = delete;
  rank_figures& operator=(const rank_figures&) = delete;

  /// A room moved from `from` (nullopt: it was just opened) to `to`, `age`
  /// after it opened; `why` is its failure when `to` is Failed.
  void moved(std::optional<kv_poll> from, kv_poll to, const failure& why,
             std::chrono::nanoseconds age);

  /// A room failed as it opened: its peer was known down (`code`).
  void fast_failed(errc code);

  /// Rooms in flight in state `s` as this rank counted them.
  int64_t in_flight(kv_poll s) const;

 private:
  std::shared_ptr<registry> reg_;
  label_set base_;
  counter& success_;
  counter& failed_;
  histogram& success_seconds_;
  histogram& failed_seconds_;
  std::array<gauge*, 3> in_flight_{};  // Bootstrapping, WaitingForInput, Transferring
  std::array<int64_t, 3> mine_{};      // what this rank added to each
  std::map<std::pair<errc, std::string>, counter*> failures_;  // (code, origin)
  std::map<errc, counter*> fast_failed_;
};

}  // namespace kvferry::metrics
