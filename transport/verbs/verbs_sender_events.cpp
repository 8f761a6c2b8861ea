// What comes back to a verbs sender: the peer's replies on the control
// socket (grants, acks, refusals; reader_loop) and the completion queue's
// work completions (completion_loop). The sender's posting side is
// verbs_sender.cpp.
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "transport/base/wire_hello.hpp"
#include "transport/verbs/verbs_sender.hpp"
#include "transport/verbs/verbs_wire.hpp"

namespace kvferry::transport::verbs {

void verbs_sender::reader_loop(int fd, uint64_t generation) {
  std::string message;
  std::vector<op_grant> grants;
  for (;;) {
    reply v;
    auto st = read_exact(fd, &v, sizeof(v));
    // Bounded before anything is sized by it; that it matches the batch's
    // op count is checked below, against the batch.
    if (st.ok() && ((v.magic != reply_magic && v.magic != released_magic) ||
                    v.message_len > max_reply_message || v.n_regions > max_ops_per_batch ||
                    (v.magic == released_magic && v.n_regions != 0)))
      st = status::protocol_error("malformed reply (magic " + std::to_string(v.magic) + ", " +
                                  std::to_string(v.message_len) + " B of message, at most " +
                                  std::to_string(max_reply_message) + ", " +
                                  std::to_string(v.n_regions) + " op grants, at most " +
                                  std::to_string(max_ops_per_batch) + ")");
    if (st.ok()) {
      message.resize(v.message_len);
      grants.resize(v.n_regions);
      st = read_exact(fd, message.data(), message.size());
      if (st.ok())
        st = read_exact(fd, grants.data(), grants.size() * sizeof(op_grant));
    }
    if (!st.ok()) {
      drop(generation, st.error_code() == code::protocol_error
                           ? status::protocol_error(peer() + ": " + st.message())
                           : status::connection_lost(peer() + ": " + st.message()));
      return;
    }
    if (v.magic == released_magic) {
      status result;
      {
        std::lock_guard guard{mu_};
        auto i = pending_.find(v.seq);
        if (i == pending_.end() || i->second.generation != generation)
          continue;
        result = i->second.result;
      }
      finish(v.seq, std::move(result));
      continue;
    }
    auto result = admission::reply_status(v.code, peer() + ": " + message);
    if (!result) {
      drop(generation, status::protocol_error(peer() + ": reply code " + std::to_string(v.code) +
                                              " is not a transport code"));
      return;
    }
    if (!result->ok()) {
      if (!grants.empty()) {
        drop(generation,
             status::protocol_error(peer() + ": refusal of batch seq " + std::to_string(v.seq) +
                                    " carries " + std::to_string(grants.size()) + " op grants"));
        return;
      }
      // Refused: the receiver holds nothing of it; no end is sent.
      finish(v.seq, std::move(*result));
      continue;
    }
    status broken;
    posted outcome;
    {
      std::unique_lock guard{mu_};
      auto p = pending_.find(v.seq);
      if (p == pending_.end()) {
        guard.unlock();
        drop(generation, status::protocol_error(peer() + ": reply for batch seq " +
                                                std::to_string(v.seq) + " that was not begun"));
        return;
      }
      if (auto ops = p->second.batch.ops.size(); grants.size() != ops) {
        guard.unlock();
        drop(generation,
             status::protocol_error(peer() + ": reply for batch seq " + std::to_string(v.seq) +
                                    " grants " + std::to_string(grants.size()) +
                                    " ops, expected its " + std::to_string(ops) + " ops"));
        return;
      }
      outcome = write(guard, v.seq, generation, grants, broken);
    }
    if (outcome == posted::broken) {
      drop(generation, broken);
      return;
    }
    if (outcome == posted::nothing) {
      // Nothing to write (or refused here): release it at the receiver.
      if (auto sent = send_frame(end_magic, v.seq, 0, {}); !sent.ok()) {
        drop(generation, status::connection_lost(peer() + ": " + sent.message()));
        return;
      }
    }
  }
}

void verbs_sender::completion_loop() {
  ibv_wc wcs[32];
  for (;;) {
    pollfd fds[2] = {{channel_->fd, POLLIN, 0}, {wake_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR)
        continue;
      return;
    }
    if (fds[1].revents != 0)
      return;
    ibv_cq* ev_cq = nullptr;
    void* ev_ctx = nullptr;
    if (::ibv_get_cq_event(channel_, &ev_cq, &ev_ctx) != 0)
      continue;  // nothing yet (the channel is non-blocking)
    ::ibv_ack_cq_events(ev_cq, 1);
    // Re-arm before draining, so a completion that arrives meanwhile raises
    // a new event instead of being missed.
    ::ibv_req_notify_cq(cq_, 0);
    for (;;) {
      int n = ::ibv_poll_cq(cq_, 32, wcs);
      if (n <= 0)
        break;
      for (int k = 0; k < n; ++k) {
        auto& wc = wcs[k];
        uint64_t gen = 0;
        bool send_end = false;
        status why;
        {
          std::lock_guard guard{mu_};
          auto i = pending_.find(wc.wr_id);
          // Flushed requests of a queue pair already replaced: their batches failed.
          if (i == pending_.end() || i->second.generation != link_.generation())
            continue;
          auto& p = i->second;
          gen = p.generation;
          if (wc.status != IBV_WC_SUCCESS) {
            why = status::connection_lost(peer() + ": RDMA write of batch " +
                                          std::to_string(p.batch.cookie) +
                                          " failed: " + ::ibv_wc_status_str(wc.status) +
                                          " (vendor error " + std::to_string(wc.vendor_err) + ")");
          } else if (!p.chunks.empty()) {
            sq_used_ -= p.chunks.front();
            p.chunks.pop_front();
            send_end = p.chunks.empty() && p.all_posted;
          }
        }
        cv_.notify_all();
        if (!why.ok()) {
          drop(gen, why);
          continue;
        }
        if (send_end) {
          if (auto st = send_frame(end_magic, wc.wr_id, 0, {}); !st.ok())
            drop(gen, status::connection_lost(peer() + ": " + st.message()));
        }
      }
    }
  }
}

}  // namespace kvferry::transport::verbs
