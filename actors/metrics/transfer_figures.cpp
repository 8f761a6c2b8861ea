#include "actors/metrics/transfer_figures.hpp"

namespace kvferry::metrics {

namespace {

label_set transfer_labels(const rank_ref& self, std::string transport) {
  return {{"kv_instance", self.instance},
          {"tp", std::to_string(self.tp)},
          {"pp", std::to_string(self.pp)},
          {"transport", std::move(transport)}};
}

}  // namespace

transfer_figures::transfer_figures(std::shared_ptr<registry> reg, const rank_ref& self,
                                   std::string transport)
    : reg_(std::move(reg)),
      base_(transfer_labels(self, std::move(transport))),
      bandwidth_(reg_->gauge_at("kvferry_transfer_bandwidth_bytes_per_second",
                                "Bytes posted per second since the previous collection", base_)) {}

void transfer_figures::watch_bandwidth() {
  reg_->on_collect([weak = weak_from_this()] {
    auto me = weak.lock();
    if (me)
      me->sample_bandwidth();
    return me != nullptr;
  });
}

transfer_figures::peer_series& transfer_figures::of(const rank_ref& peer) {
  auto i = peers_.find(peer);
  if (i != peers_.end())
    return i->second;
  auto labels = base_;
  labels.emplace_back("peer", to_string(peer));
  peer_series s{
      &reg_->counter_at("kvferry_transfer_bytes_total", "Bytes posted to the peer rank's pool",
                        labels),
      &reg_->counter_at("kvferry_transfer_batches_total",
                        "Batches (coalesced writes) posted to the peer rank", labels),
      &reg_->counter_at("kvferry_transfer_failed_batches_total",
                        "Batches to the peer rank refused or completed with an error", labels),
      &reg_->counter_at("kvferry_transfer_staged_waits_total",
                        "Staged chunks to the peer rank that waited for its ring's watermark or "
                        "the gather buffer after their grant",
                        labels)};
  return peers_.emplace(peer, s).first->second;
}

void transfer_figures::posted(const rank_ref& peer, uint64_t bytes) {
  auto& s = of(peer);
  s.bytes->add(bytes);
  s.batches->add();
  bytes_.fetch_add(bytes, std::memory_order_relaxed);
}

void transfer_figures::failed(const rank_ref& peer) {
  of(peer).failed->add();
}

void transfer_figures::staged_waited(const rank_ref& peer) {
  of(peer).staged_waits->add();
}

void transfer_figures::sample_bandwidth() {
  std::lock_guard<std::mutex> guard{sample_mu_};
  auto now = std::chrono::steady_clock::now();
  auto bytes = bytes_.load(std::memory_order_relaxed);
  auto secs = std::chrono::duration<double>(now - sampled_at_).count();
  if (secs <= 0)
    return;
  bandwidth_.set(static_cast<int64_t>(static_cast<double>(bytes - sampled_bytes_) / secs));
  sampled_bytes_ = bytes;
  sampled_at_ = now;
}

}  // namespace kvferry::metrics
