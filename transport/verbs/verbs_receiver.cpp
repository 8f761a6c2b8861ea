#include "transport/verbs/verbs_receiver.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <deque>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "transport/base/admission_server.hpp"
#include "transport/base/wire_hello.hpp"
#include "transport/verbs/verbs_qp.hpp"
#include "transport/verbs/verbs_windows.hpp"
#include "transport/verbs/verbs_wire.hpp"
#include "transport/verbs/window_plan.hpp"

namespace kvferry::transport::verbs {

namespace {

/// Binds and invalidations a receiver's queue pair has outstanding at once.
constexpr uint32_t max_window_requests = 256;

struct cq_deleter {
  void operator()(ibv_cq* cq) const {
    if (cq != nullptr)
      ::ibv_destroy_cq(cq);
  }
};

}  // namespace

result<std::unique_ptr<verbs_receiver>> verbs_receiver::start(
    std::shared_ptr<device> dev, const std::string& host, uint16_t port, verbs_regions& regions,
    fence_table& fences, const peer_key& key, window_limits limits) {
  auto acceptor = tcp_acceptor::listen("verbs", host, port);
  if (!acceptor.ok())
    return acceptor.error();
  return std::unique_ptr<verbs_receiver>{new verbs_receiver(
      std::move(dev), std::move(acceptor).value(), regions, fences, key, limits)};
}

verbs_receiver::verbs_receiver(std::shared_ptr<device> dev, std::unique_ptr<tcp_acceptor> acceptor,
                               verbs_regions& regions, fence_table& fences, const peer_key& key,
                               window_limits limits)
    : dev_(std::move(dev)),
      regions_(regions),
      fences_(fences),
      key_(key),
      limits_(limits),
      acceptor_(std::move(acceptor)) {
  acceptor_->serve([this](connection& c) { serve(c); });
}

// The connections (their queue pairs too) end before the device they use.
verbs_receiver::~verbs_receiver() {
  acceptor_->stop();
}

void verbs_receiver::serve(connection& conn) {
  int fd = conn.fd.get();
  hello h;
  if (!acceptor_->connections().greet(conn, h, max_name, key_, endpoint()))
    return;
  const std::string sender = conn.sender;  // set by greet(), fixed from now on
  const bool windows = regions_.windows();
  // Its own completion queue, polled only by this thread (the window binds'
  // and invalidations'); declared first, so it is destroyed last.
  const uint32_t depth = windows ? std::min(dev_->max_qp_wr, max_window_requests) : 1;
  std::unique_ptr<ibv_cq, cq_deleter> cq{
      ::ibv_create_cq(dev_->context, static_cast<int>(depth + 1), nullptr, nullptr, 0)};
  if (!cq)
    return;
  auto qp = make_rc_qp(*dev_, cq.get(), depth, 1);
  if (!qp.ok())
    return;
  hello reply;
  reply.qp = local_info(*dev_, **qp);
  if (!connect_qp(*dev_, **qp, reply.qp, h.qp).ok())
    return;
  {
    std::vector<iovec> iov{{&reply, sizeof(reply)}};
    if (!write_all(fd, iov).ok())
      return;
  }
  // Declared after the queue pair: its windows are freed before it goes.
  std::optional<window_pool> pool;
  if (windows)
    pool.emplace(dev_->pd, **qp, cq.get(), depth, limits_.per_connection);
  bool qp_broken = false;
  std::vector<op_grant> grants;  // what the next reply tells, one per op
  // The windows of each admitted batch, in admission order: serve() releases
  // batches in that order (each end is for the oldest; the rest at the end).
  std::deque<std::vector<bound_window>> held;
  admission::backend_part part;
  part.wire = admission_magics;
  part.check = [&](const admission::begun_batch& b) -> status {
    // Pin first, then look up: a region found here stays registered until
    // the batch is released.
    regions_.pin(b.regions);
    auto refuse = [&](status why) {
      regions_.unpin(b.regions);
      grants.clear();
      return why;
    };
    std::map<region_id, region_extent> extents;
    std::map<region_id, mr_span> mrs;
    for (auto id : b.regions) {
      auto length = regions_.length_of(id);
      auto whole = regions_.find(id, 0, length, "receiver");
      if (!whole.ok())
        return refuse(whole.error());
      extents[id] = region_extent{reinterpret_cast<uint64_t>(whole->addr), length};
      mrs[id] = *whole;
    }
    auto plan = plan_windows(b.ops, extents, windows ? limits_.per_batch : UINT32_MAX);
    if (!plan.ok())
      return refuse(plan.error());
    grants.assign(b.ops.size(), op_grant{});
    if (!windows) {
      for (size_t k = 0; k < b.ops.size(); ++k)
        if (plan->targets[k].window != op_target::no_window)
          grants[k] = op_grant{plan->targets[k].addr, mrs[b.ops[k].region].rkey};
      held.emplace_back();
      return {};
    }
    std::vector<window_span> spans;
    spans.reserve(plan->windows.size());
    for (auto& w : plan->windows)
      spans.push_back(window_span{mrs[w.region].mr, w.addr, w.length});
    auto bound = pool->bind(spans);
    if (!bound.ok()) {
      // A device failure (not the limit): the queue pair may be broken, so
      // the connection ends; the sender reconnects with a new one.
      if (bound.error().error_code() != code::invalid_argument)
        conn.fd.shutdown();
      return refuse(bound.error());
    }
    for (size_t k = 0; k < b.ops.size(); ++k)
      if (auto w = plan->targets[k].window; w != op_target::no_window)
        grants[k] = op_grant{plan->targets[k].addr, (*bound)[w].rkey};
    held.push_back(std::move(bound).value());
    return {};
  };
  part.answer = [&](uint64_t seq, const status& reply) {
    return admission::send_reply(fd, reply_magic, seq, reply, std::exchange(grants, {}));
  };
  part.unpin = [&](const std::vector<region_id>& ids) {
    // The sender's access ends before the regions may go: its windows are
    // invalidated (or, where the queue pair is broken, freed) first.
    if (!held.empty()) {
      auto windows_of_batch = std::move(held.front());
      held.pop_front();
      if (pool && !windows_of_batch.empty()) {
        if (qp_broken) {
          pool->retire(windows_of_batch);
        } else if (!pool->invalidate(windows_of_batch).ok()) {
          break_qp(**qp);
          qp_broken = true;
        }
      }
    }
    regions_.unpin(ids);
  };
  // Nothing of an admitted batch may land once it is released.
  part.quiesce = [&] {
    break_qp(**qp);
    qp_broken = true;
  };
  admission::serve(fd, fences_, sender, part);
}

}  // namespace kvferry::transport::verbs
