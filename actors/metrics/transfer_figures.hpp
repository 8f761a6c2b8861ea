// A prefill rank's data-plane figures for Prometheus: bytes and batches
// posted per transport and peer (decode rank), batches that failed, and the
// bandwidth over the time between two collections. Counted from the transfer
// actor's thread; the bandwidth is worked out on the collecting thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "actors/metrics/registry.hpp"
#include "messages/ids.hpp"

namespace kvferry::metrics {

class transfer_figures : public std::enable_shared_from_this<transfer_figures> {
 public:
  /// Labelled with `self` and the transport's name ("tcp", "shm", "auto").
  transfer_figures(std::shared_ptr<registry> reg, const rank_ref& self, std::string transport);
  ~transfer_figures() { bandwidth_.set(0); }
  transfer_figures(const transfer_figures&) = delete;
  transfer_figures& operator=(const transfer_figures&) = delete;

  /// Makes the registry work out the bandwidth at each collection while
  /// this lives. Call once, after make_shared.
  void watch_bandwidth();

  /// A batch of `bytes` to `peer` was posted.
  void posted(const rank_ref& peer, uint64_t bytes);
  /// A batch to `peer` failed (refused or completed with an error).
  void failed(const rank_ref& peer);
  /// A staged chunk to `peer`, granted its ring slot, had to wait for the
  /// ring's watermark (or the gather buffer) before it could go.
  void staged_waited(const rank_ref& peer);

 private:
  struct peer_series {
    counter* bytes;
    counter* batches;
    counter* failed;
    counter* staged_waits;
  };
  peer_series& of(const rank_ref& peer);
  void sample_bandwidth();

  std::shared_ptr<registry> reg_;
  label_set base_;
  std::map<rank_ref, peer_series> peers_;
  std::atomic<uint64_t> bytes_{0};  // every peer's, for the bandwidth
  gauge& bandwidth_;
  std::mutex sample_mu_;  // the collecting threads'
  uint64_t sampled_bytes_ = 0;
  std::chrono::steady_clock::time_point sampled_at_ = std::chrono::steady_clock::now();
};

}  // namespace kvferry::metrics
