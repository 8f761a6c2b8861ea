// The memory windows of one receiver connection (verbs_options::windows):
// type-2 windows bound through that connection's queue pair, so that only
// the sender's queue pair connected to it can write through them, each
// covering bytes one admitted batch named, and invalidated when the batch
// ends. Windows are allocated once and rebound with the next 8-bit key
// (next_window_rkey), so an rkey a sender was told never matches again;
// one that has used every key is freed and replaced.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <vector>

#include "transport/status.hpp"

namespace kvferry::transport::verbs {

/// What one window covers: `length` bytes at `addr` of registration `mr`.
struct window_span {
  ibv_mr* mr = nullptr;
  uint64_t addr = 0;
  uint64_t length = 0;
};

/// A window bound for a batch: which of the pool's, and the rkey it was
/// bound with (what the sender was told).
struct bound_window {
  uint32_t slot = 0;
  uint32_t rkey = 0;
};

class window_pool {
 public:
  /// Windows of `pd`, bound and invalidated by work requests on `qp` (RTS),
  /// whose send completions arrive on `cq`, which nothing else polls; at
  /// most `depth` requests are outstanding at a time. At most `max_held`
  /// windows are bound at once. `qp` and `cq` must outlive the pool.
  window_pool(ibv_pd* pd, ibv_qp& qp, ibv_cq* cq, uint32_t depth, uint32_t max_held);
  window_pool(const window_pool&) = delete;
  window_pool& operator=(const window_pool&) = delete;

  /// Frees every window; freeing one still bound invalidates it.
  ~window_pool();

  /// Binds a window over each of `spans` (remote write only), in order, and
  /// returns once every bind completed. invalid_argument (nothing posted):
  /// more than max_held would be bound. io_error: a window could not be
  /// allocated, or a bind failed (the queue pair is then in the error state).
  result<std::vector<bound_window>> bind(const std::vector<window_span>& spans);

  /// Invalidates `windows` (local invalidate of each rkey) and returns once
  /// every invalidation completed; then they are free for later batches. On
  /// an error the windows are freed instead (which invalidates them too).
  status invalidate(const std::vector<bound_window>& windows);

  /// Frees `windows` without posting anything (the queue pair is broken):
  /// freeing a window invalidates it.
  void retire(const std::vector<bound_window>& windows);

  /// Windows bound for batches now.
  uint32_t held() const { return held_; }

 private:
  struct slot {
    ibv_mw* mw = nullptr;     // null once retired: allocated again on next use
    uint32_t first_rkey = 0;  // the rkey it was allocated with
    uint32_t rkey = 0;        // the rkey of its latest bind
  };

  /// A free slot with a window in it, allocating one where needed.
  result<uint32_t> take();
  void free_slot(uint32_t index);
  /// Posts `wrs` in linked chunks of at most depth_, the last of each
  /// signalled, and waits for each chunk's completion.
  status post_and_wait(std::vector<ibv_send_wr>& wrs, const char* what);

  ibv_pd* const pd_;
  ibv_qp& qp_;
  ibv_cq* const cq_;
  const uint32_t depth_;
  const uint32_t max_held_;
  std::vector<slot> slots_;
  std::vector<uint32_t> idle_;  // slots not bound for any batch
  uint32_t held_ = 0;
};

}  // namespace kvferry::transport::verbs
