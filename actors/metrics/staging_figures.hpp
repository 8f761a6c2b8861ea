// A staging ring's figures for Prometheus: its size, the bytes handed out and
// not consumed yet, and the asks that had to wait for their room to open
// there. Labelled with the decode rank (kv_instance, role, tp, pp). Set from
// the staging actor's thread.
#pragma once

#include <cstdint>
#include <memory>

#include "actors/metrics/rank_figures.hpp"
#include "actors/metrics/registry.hpp"

namespace kvferry::metrics {

class staging_figures {
 public:
  staging_figures(std::shared_ptr<registry> reg, const rank_ref& rank, uint64_t ring_bytes)
      : reg_(std::move(reg)),
        used_(reg_->gauge_at("kvferry_staging_ring_used_bytes",
                             "Bytes of the staging ring handed out and not consumed yet",
                             rank_labels(rank))),
        waits_(reg_->counter_at("kvferry_staging_waits_total",
                                "Staging asks that waited for their room to open on the ring",
                                rank_labels(rank))) {
    reg_->gauge_at("kvferry_staging_ring_bytes", "Size of the staging ring", rank_labels(rank))
        .set(static_cast<int64_t>(ring_bytes));
  }
  ~staging_figures() { used_.set(0); }
  staging_figures(const staging_figures&) = delete;
  staging_figures& operator=(const staging_figures&) = delete;

  void in_use(uint64_t bytes) { used_.set(static_cast<int64_t>(bytes)); }
  void waited() { waits_.add(); }

 private:
  std::shared_ptr<registry> reg_;
  gauge& used_;
  counter& waits_;
};

}  // namespace kvferry::metrics
