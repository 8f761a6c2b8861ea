#include "actors/metrics/decider_figures.hpp"

namespace kvferry::metrics {

namespace {

constexpr const char* verdict_help =
    "Rooms' time from their first join at the decider to the verdict";

}  // namespace

decider_figures::decider_figures(std::shared_ptr<registry> reg, const std::string& instance)
    : reg_(std::move(reg)),
      instance_(instance),
      success_(reg_->histogram_at("kvferry_verdict_seconds", verdict_help,
                                  {{"kv_instance", instance}, {"outcome", "success"}})),
      failed_(reg_->histogram_at("kvferry_verdict_seconds", verdict_help,
                                 {{"kv_instance", instance}, {"outcome", "failed"}})),
      refused_(reg_->counter_at("kvferry_rooms_refused_total",
                                "Rooms the decider refused at their first join: the instance "
                                "held as many undecided rooms as it admits (kvferry.max-rooms)",
                                {{"kv_instance", instance}})) {}

void decider_figures::refused() {
  refused_.add();
}

void decider_figures::verdict(kv_poll outcome, std::chrono::nanoseconds took) {
  (outcome == kv_poll::success ? success_ : failed_).observe(took);
}

decider_figures::peer_series& decider_figures::of(const rank_ref& peer) {
  auto name = to_string(peer);
  auto i = peers_.find(name);
  if (i != peers_.end())
    return i->second;
  label_set labels{{"kv_instance", instance_}, {"peer", name}};
  peer_series s{
      &reg_->counter_at("kvferry_heartbeat_misses_total",
                        "Heartbeats the decider sent that went unanswered, by peer rank", labels),
      &reg_->gauge_at("kvferry_peer_up", "1 while the peer rank answers the decider's heartbeats",
                      labels),
      &reg_->gauge_at("kvferry_peer_generation", "The instance generation of the peer rank",
                      labels)};
  // Up until declared lost, as the decider's liveness has it.
  s.up->set(1);
  s.generation->set(static_cast<int64_t>(peer.instance_generation));
  return peers_.emplace(std::move(name), s).first->second;
}

void decider_figures::missed(const rank_ref& peer) {
  of(peer).misses->add();
}

void decider_figures::standing(const rank_ref& peer, bool up) {
  auto& s = of(peer);
  s.up->set(up ? 1 : 0);
  s.generation->set(static_cast<int64_t>(peer.instance_generation));
}

}  // namespace kvferry::metrics
