#include "transport/verbs/verbs_windows.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "transport/verbs/window_plan.hpp"

namespace kvferry::transport::verbs {

namespace {

/// A bind or an invalidation is local to the NIC: microseconds. Much longer
/// means the device is stuck; the connection is given up.
constexpr std::chrono::seconds completion_timeout{5};

}  // namespace

window_pool::window_pool(ibv_pd* pd, ibv_qp& qp, ibv_cq* cq, uint32_t depth, uint32_t max_held)
    : pd_(pd), qp_(qp), cq_(cq), depth_(std::max<uint32_t>(depth, 1)), max_held_(max_held) {}

window_pool::~window_pool() {
  for (auto& s : slots_)
    if (s.mw != nullptr)
      ::ibv_dealloc_mw(s.mw);
}

result<uint32_t> window_pool::take() {
  uint32_t index;
  if (!idle_.empty()) {
    index = idle_.back();
    idle_.pop_back();
  } else {
    index = static_cast<uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  auto& s = slots_[index];
  if (s.mw == nullptr) {
    s.mw = ::ibv_alloc_mw(pd_, IBV_MW_TYPE_2);
    if (s.mw == nullptr) {
      int err = errno;
      idle_.push_back(index);
      return status::io_error("verbs: ibv_alloc_mw (type 2) for window " + std::to_string(index) +
                              " of this connection: " + std::strerror(err) + " (errno " +
                              std::to_string(err) + ")");
    }
    s.first_rkey = s.rkey = s.mw->rkey;
  }
  return index;
}

void window_pool::free_slot(uint32_t index) {
  auto& s = slots_[index];
  if (s.mw != nullptr)
    ::ibv_dealloc_mw(s.mw);
  s.mw = nullptr;
  idle_.push_back(index);
}

result<std::vector<bound_window>> window_pool::bind(const std::vector<window_span>& spans) {
  if (spans.size() > max_held_ - held_)
    return status::invalid_argument("batch needs " + std::to_string(spans.size()) +
                                    " memory windows while this connection holds " +
                                    std::to_string(held_) + " for earlier batches, at most " +
                                    std::to_string(max_held_) +
                                    " at once: wait for earlier batches to end");
  std::vector<bound_window> bound;
  bound.reserve(spans.size());
  std::vector<ibv_send_wr> wrs(spans.size());
  for (size_t k = 0; k < spans.size(); ++k) {
    auto index = take();
    if (!index.ok()) {
      for (auto& b : bound)
        idle_.push_back(b.slot);
      return index.error();
    }
    auto* s = &slots_[*index];
    auto next = next_window_rkey(s->rkey, s->first_rkey);
    if (!next) {
      // Every key of this window was told to someone once: a new window.
      free_slot(*index);
      index = take();
      if (!index.ok()) {
        for (auto& b : bound)
          idle_.push_back(b.slot);
        return index.error();
      }
      s = &slots_[*index];
      next = next_window_rkey(s->rkey, s->first_rkey);
    }
    // Taken now, whether the bind succeeds or not: a key is used once.
    s->rkey = *next;
    bound.push_back(bound_window{*index, *next});
    auto& wr = wrs[k];
    wr.wr_id = k;
    wr.opcode = IBV_WR_BIND_MW;
    wr.bind_mw.mw = s->mw;
    wr.bind_mw.rkey = *next;
    wr.bind_mw.bind_info.mr = spans[k].mr;
    wr.bind_mw.bind_info.addr = spans[k].addr;
    wr.bind_mw.bind_info.length = spans[k].length;
    wr.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
  }
  if (auto st = post_and_wait(wrs, "memory window bind"); !st.ok()) {
    // Some may be bound: freeing them invalidates them.
    for (auto& b : bound)
      free_slot(b.slot);
    return st;
  }
  held_ += static_cast<uint32_t>(bound.size());
  return bound;
}

status window_pool::invalidate(const std::vector<bound_window>& windows) {
  std::vector<ibv_send_wr> wrs(windows.size());
  for (size_t k = 0; k < windows.size(); ++k) {
    wrs[k].wr_id = k;
    wrs[k].opcode = IBV_WR_LOCAL_INV;
    wrs[k].invalidate_rkey = windows[k].rkey;
  }
  auto st = post_and_wait(wrs, "memory window invalidation");
  if (!st.ok()) {
    retire(windows);
    return st;
  }
  for (auto& w : windows)
    idle_.push_back(w.slot);
  held_ -= static_cast<uint32_t>(windows.size());
  return {};
}

void window_pool::retire(const std::vector<bound_window>& windows) {
  for (auto& w : windows)
    free_slot(w.slot);
  held_ -= static_cast<uint32_t>(windows.size());
}

status window_pool::post_and_wait(std::vector<ibv_send_wr>& wrs, const char* what) {
  for (size_t first = 0; first < wrs.size();) {
    size_t n = std::min<size_t>(depth_, wrs.size() - first);
    for (size_t k = first; k < first + n; ++k) {
      bool last = k + 1 == first + n;
      wrs[k].next = last ? nullptr : &wrs[k + 1];
      wrs[k].send_flags = last ? IBV_SEND_SIGNALED : 0;
    }
    ibv_send_wr* bad = nullptr;
    if (int rc = ::ibv_post_send(&qp_, &wrs[first], &bad); rc != 0)
      return status::io_error(std::string{"verbs: ibv_post_send of "} + std::to_string(n) + " " +
                              what + " requests: " + std::strerror(rc) + " (errno " +
                              std::to_string(rc) + ")");
    // Only the chunk's last request is signalled; an earlier one that fails
    // completes with its error first.
    auto deadline = std::chrono::steady_clock::now() + completion_timeout;
    for (;;) {
      ibv_wc wc{};
      int got = ::ibv_poll_cq(cq_, 1, &wc);
      if (got < 0)
        return status::io_error(std::string{"verbs: ibv_poll_cq failed waiting for "} + what);
      if (got == 1) {
        if (wc.status != IBV_WC_SUCCESS)
          return status::io_error(std::string{"verbs: "} + what + " " + std::to_string(wc.wr_id) +
                                  " of " + std::to_string(wrs.size()) +
                                  " failed: " + ::ibv_wc_status_str(wc.status) + " (vendor error " +
                                  std::to_string(wc.vendor_err) + ")");
        break;
      }
      if (std::chrono::steady_clock::now() > deadline)
        return status::io_error(std::string{"verbs: "} + std::to_string(n) + " " + what +
                                " requests did not complete within " +
                                std::to_string(completion_timeout.count()) + " s");
      std::this_thread::yield();
    }
    first += n;
  }
  return {};
}

}  // namespace kvferry::transport::verbs
