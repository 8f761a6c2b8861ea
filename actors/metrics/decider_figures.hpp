// A decider's figures for Prometheus: how long its rooms took from their
// first join to the verdict, by outcome, and how the ranks it pings answer:
// heartbeats missed, and each one up or down with its generation. Series
// labelled with the decode instance (kv_instance) and, per peer, the rank
// ("prefill-0 tp1 pp0"). Called from the decider's thread; plain logic.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "actors/metrics/registry.hpp"
#include "messages/ids.hpp"
#include "messages/kv_poll.hpp"

namespace kvferry::metrics {

class decider_figures {
 public:
  decider_figures(std::shared_ptr<registry> reg, const std::string& instance);

  /// A room's verdict went out, `took` after its first join.
  void verdict(kv_poll outcome, std::chrono::nanoseconds took);

  /// A ping to `peer` went unanswered.
  void missed(const rank_ref& peer);

  /// `peer` answered a ping (up) or was declared lost (down).
  void standing(const rank_ref& peer, bool up);

  /// A room was refused at its first join: the instance held max_rooms.
  void refused();

 private:
  struct peer_series {
    counter* misses;
    gauge* up;
    gauge* generation;
  };
  peer_series& of(const rank_ref& peer);

  std::shared_ptr<registry> reg_;
  std::string instance_;
  histogram& success_;
  histogram& failed_;
  counter& refused_;
  std::map<std::string, peer_series> peers_;  // by peer rank, rendered
};

}  // namespace kvferry::metrics
