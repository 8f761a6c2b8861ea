#include "transport/verbs/verbs_sender.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "transport/base/wire_hello.hpp"
#include "transport/verbs/verbs_wire.hpp"

namespace kvferry::transport::verbs {

namespace {

constexpr int connect_timeout_ms = 5000;
constexpr uint32_t max_depth = 1024;        // send work requests per queue pair
constexpr uint32_t max_sges = 16;           // scatter/gather entries per work request
constexpr uint64_t max_piece = 1ull << 30;  // bytes per entry (and per work request)

struct wr_plan {
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  size_t first_sge = 0;
  int num_sge = 0;
  uint64_t bytes = 0;
};

}  // namespace

result<std::unique_ptr<verbs_sender>> verbs_sender::start(
    std::shared_ptr<device> dev, host_port where, std::string endpoint, sender_identity who,
    verbs_regions& local, std::function<void(completion)> complete) {
  ibv_comp_channel* channel = ::ibv_create_comp_channel(dev->context);
  if (channel == nullptr)
    return status::io_error("verbs: ibv_create_comp_channel on " + dev->name + ": " +
                            std::strerror(errno));
  uint32_t depth = std::min(dev->max_qp_wr, max_depth);
  // Room for a whole queue pair's flushed requests next to the new one's.
  ibv_cq* cq = ::ibv_create_cq(dev->context, static_cast<int>(2 * depth + 16), nullptr, channel, 0);
  if (cq == nullptr) {
    ::ibv_destroy_comp_channel(channel);
    return status::io_error("verbs: ibv_create_cq on " + dev->name + ": " + std::strerror(errno));
  }
  // Non-blocking: the completion thread polls the channel next to its wake fd.
  int flags = ::fcntl(channel->fd, F_GETFL);
  ::fcntl(channel->fd, F_SETFL, flags | O_NONBLOCK);
  int wake = ::eventfd(0, EFD_CLOEXEC);
  if (wake < 0 || ::ibv_req_notify_cq(cq, 0) != 0) {
    if (wake >= 0)
      ::close(wake);
    ::ibv_destroy_cq(cq);
    ::ibv_destroy_comp_channel(channel);
    return status::io_error("verbs: cannot arm the completion queue on " + dev->name);
  }
  return std::unique_ptr<verbs_sender>{
      new verbs_sender(std::move(dev), channel, cq, wake, std::move(where), std::move(endpoint),
                       std::move(who), local, std::move(complete))};
}

verbs_sender::verbs_sender(std::shared_ptr<device> dev, ibv_comp_channel* channel, ibv_cq* cq,
                           int wake, host_port where, std::string endpoint, sender_identity who,
                           verbs_regions& local, std::function<void(completion)> complete)
    : dev_(std::move(dev)),
      channel_(channel),
      cq_(cq),
      wake_(wake),
      where_(std::move(where)),
      endpoint_(std::move(endpoint)),
      who_(std::move(who)),
      local_(local),
      complete_(std::move(complete)),
      depth_(std::min(dev_->max_qp_wr, max_depth)),
      max_sge_(std::min(dev_->max_sge, max_sges)) {
  completer_ = std::thread{[this] { completion_loop(); }};
  worker_ = std::thread{[this] { worker_loop(); }};
}

verbs_sender::~verbs_sender() {
  std::deque<write_batch> queued;
  {
    std::lock_guard guard{mu_};
    stopping_ = true;
    queued.swap(queue_);
    link_.shut();
    if (qp_)
      break_qp(*qp_);
  }
  cv_.notify_all();
  uint64_t one = 1;
  if (::write(wake_, &one, sizeof(one)) < 0) {
    // An eventfd at 0 cannot be full.
  }
  worker_.join();
  link_.join_reader();
  completer_.join();
  auto why = status::shut_down(peer() + ": transport closed");
  for (auto& b : queued)
    fail(b.cookie, why);
  std::map<uint64_t, pending> left;
  {
    std::lock_guard guard{mu_};
    left.swap(pending_);
    qp_.reset();
  }
  for (auto& [seq, p] : left) {
    local_.unpin(p.pinned);
    fail(p.batch.cookie, why);
  }
  ::ibv_destroy_cq(cq_);
  ::ibv_destroy_comp_channel(channel_);
  ::close(wake_);
}

void verbs_sender::post(write_batch batch) {
  {
    std::lock_guard guard{mu_};
    if (!stopping_) {
      queue_.push_back(std::move(batch));
      cv_.notify_all();
      return;
    }
  }
  fail(batch.cookie, status::shut_down(peer() + ": transport closed"));
}

status verbs_sender::handshake(int fd) {
  hello h;
  {
    std::lock_guard guard{mu_};
    h.qp = local_qp_;
  }
  if (auto st = introduce(fd, h, who_, max_name); !st.ok())
    return st;
  hello reply;
  if (auto st = read_exact(fd, &reply, sizeof(reply)); !st.ok())
    return st;
  if (reply.magic != hello_magic || reply.version != wire_version)
    return status::protocol_error("the peer is not a verbs receiver of wire version " +
                                  std::to_string(wire_version));
  std::lock_guard guard{mu_};
  return connect_qp(*dev_, *qp_, local_qp_, reply.qp);
}

bool verbs_sender::ensure_connected(write_batch& first) {
  {
    std::lock_guard guard{mu_};
    if (link_.up())
      return true;
  }
  // The previous connection's reader has ended (drop() ran); joined before
  // its socket and queue pair are replaced.
  link_.join_reader();
  status st;
  auto fd = connect_to(where_, connect_timeout_ms);
  if (fd.ok()) {
    auto qp = make_rc_qp(*dev_, cq_, depth_, max_sge_);
    if (qp.ok()) {
      {
        std::scoped_lock guard{write_mu_, mu_};
        qp_ = std::move(qp).value();
        local_qp_ = local_info(*dev_, *qp_);
        sq_used_ = 0;
      }
      st = handshake(fd->get());
    } else {
      st = qp.error();
    }
  } else {
    st = fd.error();
  }
  if (!st.ok()) {
    fail_first_and_queued(mu_, queue_, first, status::connect_failed(peer() + ": " + st.message()),
                          [this](const write_batch& b, const status& why) { fail(b.cookie, why); });
    return false;
  }
  std::scoped_lock guard{write_mu_, mu_};
  if (stopping_) {
    fail(first.cookie, status::shut_down(peer() + ": transport closed"));
    return false;
  }
  link_.install(std::move(fd).value(), [this](int raw, uint64_t gen) { reader_loop(raw, gen); });
  return true;
}

status verbs_sender::send_frame(uint32_t magic, uint64_t seq, uint64_t fence,
                                const std::vector<op_header>& headers) {
  frame f;
  f.magic = magic;
  f.seq = seq;
  f.fence = fence;
  f.n_ops = static_cast<uint32_t>(headers.size());
  std::vector<iovec> iov{
      {&f, sizeof(f)},
      {const_cast<op_header*>(headers.data()), headers.size() * sizeof(op_header)}};
  std::lock_guard guard{write_mu_};
  int fd;
  {
    std::lock_guard state{mu_};
    if (!link_.up())
      return status::connection_lost("the side channel was closed");
    fd = link_.fd();
  }
  return write_all(fd, iov);
}

void verbs_sender::worker_loop() {
  for (;;) {
    write_batch batch;
    {
      std::unique_lock guard{mu_};
      cv_.wait(guard, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_)
        return;
      batch = std::move(queue_.front());
      queue_.pop_front();
    }
    if (batch.ops.size() > max_ops_per_batch) {
      fail(batch.cookie, status::invalid_argument(std::to_string(batch.ops.size()) +
                                                  " ops in one batch, at most " +
                                                  std::to_string(max_ops_per_batch)));
      continue;
    }
    if (!ensure_connected(batch))
      continue;
    pending p;
    for (auto& op : batch.ops)
      if (std::find(p.pinned.begin(), p.pinned.end(), op.local) == p.pinned.end())
        p.pinned.push_back(op.local);
    // Pinned first: a region found here stays registered until the batch ends.
    local_.pin(p.pinned);
    status bad;
    for (auto& op : batch.ops) {
      auto src = local_.find(op.local, op.local_offset, op.length, "local");
      if (!src.ok()) {
        bad = src.error();
        break;
      }
      p.src.push_back(*src);
    }
    if (!bad.ok()) {
      local_.unpin(p.pinned);
      fail(batch.cookie, bad);
      continue;
    }
    std::vector<op_header> headers;
    headers.reserve(batch.ops.size());
    for (auto& op : batch.ops)
      headers.push_back(op_header{op.remote, 0, op.remote_offset, op.length});
    uint64_t seq, gen, fence = batch.fence;
    {
      std::lock_guard guard{mu_};
      if (!link_.up()) {
        // The connection dropped since ensure_connected(): retry this batch first.
        local_.unpin(p.pinned);
        queue_.push_front(std::move(batch));
        continue;
      }
      seq = next_seq_++;
      gen = link_.generation();
      p.generation = gen;
      p.batch = std::move(batch);
      pending_.emplace(seq, std::move(p));
    }
    if (auto st = send_frame(begin_magic, seq, fence, headers); !st.ok())
      drop(gen, status::connection_lost(peer() + ": " + st.message()));
  }
}

verbs_sender::posted verbs_sender::write(std::unique_lock<std::mutex>& held, uint64_t seq,
                                         uint64_t generation, const std::vector<op_grant>& grants,
                                         status& broken_why) {
  auto i = pending_.find(seq);
  if (i == pending_.end())
    return posted::nothing;
  auto& p = i->second;
  // Each op writes where the receiver granted it, with the rkey it was told
  // for it (a memory window's over that op's bytes, or the region's).
  std::vector<wr_plan> plan;
  std::vector<ibv_sge> sges;
  uint32_t last_rkey = 0;
  uint64_t last_remote_end = 0;
  for (size_t k = 0; k < p.batch.ops.size(); ++k) {
    auto& op = p.batch.ops[k];
    auto& grant = grants[k];
    if (op.length > UINT64_MAX - grant.addr) {
      p.result = status::protocol_error(peer() + ": the receiver granted op " + std::to_string(k) +
                                        " (" + std::to_string(op.length) + " B) at address " +
                                        std::to_string(grant.addr) +
                                        ", which wraps around the address space");
      return posted::nothing;
    }
    // Coalesce: a piece that continues the previous one at the remote side
    // joins its work request (extending its last entry when the local bytes
    // continue too); pieces stay below max_piece.
    uint64_t done = 0;
    while (done < op.length) {
      uint64_t len = std::min(op.length - done, max_piece);
      auto* src = p.src[k].addr + done;
      uint64_t dst = grant.addr + done;
      // Same rkey and contiguous: inside one window (ops that touch share one).
      bool joins = !plan.empty() && last_rkey == grant.rkey && last_remote_end == dst &&
                   plan.back().bytes + len <= max_piece;
      if (joins) {
        auto& back = sges.back();
        auto back_end = reinterpret_cast<std::byte*>(back.addr) + back.length;
        if (back_end == src && back.lkey == p.src[k].lkey) {
          back.length += static_cast<uint32_t>(len);
        } else if (plan.back().num_sge < static_cast<int>(max_sge_)) {
          sges.push_back(
              ibv_sge{reinterpret_cast<uint64_t>(src), static_cast<uint32_t>(len), p.src[k].lkey});
          ++plan.back().num_sge;
        } else {
          joins = false;
        }
      }
      if (joins) {
        plan.back().bytes += len;
      } else {
        plan.push_back(wr_plan{dst, grant.rkey, sges.size(), 1, len});
        sges.push_back(
            ibv_sge{reinterpret_cast<uint64_t>(src), static_cast<uint32_t>(len), p.src[k].lkey});
      }
      last_rkey = grant.rkey;
      last_remote_end = dst + len;
      done += len;
    }
  }
  if (plan.empty())
    return posted::nothing;
  // Post in chunks the send queue can hold; each chunk is one linked list of
  // work requests of which only the last is signalled.
  uint32_t chunk = std::max<uint32_t>(depth_ / 4, 1);
  std::vector<ibv_send_wr> wrs(plan.size());
  for (size_t k = 0; k < plan.size(); ++k) {
    auto& wr = wrs[k];
    wr.wr_id = seq;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.sg_list = &sges[plan[k].first_sge];
    wr.num_sge = plan[k].num_sge;
    wr.wr.rdma.remote_addr = plan[k].remote_addr;
    wr.wr.rdma.rkey = plan[k].rkey;
  }
  for (size_t first = 0; first < wrs.size();) {
    auto n = static_cast<uint32_t>(std::min<size_t>(chunk, wrs.size() - first));
    cv_.wait(held,
             [&] { return stopping_ || !link_.current(generation) || sq_used_ + n <= depth_; });
    if (stopping_ || !link_.current(generation) || pending_.count(seq) == 0)
      return posted::all;  // dropped: the batch has failed already
    for (uint32_t k = 0; k < n; ++k) {
      auto& wr = wrs[first + k];
      bool last = k + 1 == n;
      wr.next = last ? nullptr : &wrs[first + k + 1];
      wr.send_flags = last ? IBV_SEND_SIGNALED : 0;
    }
    ibv_send_wr* bad = nullptr;
    if (int rc = ::ibv_post_send(qp_.get(), &wrs[first], &bad); rc != 0) {
      broken_why = status::connection_lost(peer() + ": ibv_post_send of batch " +
                                           std::to_string(pending_.find(seq)->second.batch.cookie) +
                                           ": " + std::strerror(rc));
      return posted::broken;
    }
    sq_used_ += n;
    auto& again = pending_.find(seq)->second;
    again.chunks.push_back(n);
    first += n;
    again.all_posted = first == wrs.size();
  }
  return posted::all;
}

void verbs_sender::drop(uint64_t generation, const status& why) {
  std::vector<pending> lost;
  {
    std::lock_guard guard{mu_};
    // Nothing more goes out through it; its outstanding requests flush.
    if (link_.lose(generation) && qp_)
      break_qp(*qp_);
    for (auto i = pending_.begin(); i != pending_.end();) {
      if (i->second.generation == generation) {
        lost.push_back(std::move(i->second));
        i = pending_.erase(i);
      } else {
        ++i;
      }
    }
  }
  cv_.notify_all();
  for (auto& p : lost) {
    local_.unpin(p.pinned);
    fail(p.batch.cookie, why);
  }
}

void verbs_sender::finish(uint64_t seq, status why) {
  pending p;
  {
    std::lock_guard guard{mu_};
    auto i = pending_.find(seq);
    if (i == pending_.end())
      return;
    p = std::move(i->second);
    pending_.erase(i);
  }
  local_.unpin(p.pinned);
  complete_(completion{p.batch.cookie, std::move(why)});
}

}  // namespace kvferry::transport::verbs
