#include "transport/verbs/verbs_receiver.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <deque>
#include <set>
#include <vector>

#include "transport/base/wire_hello.hpp"
#include "transport/verbs/verbs_qp.hpp"
#include "transport/verbs/verbs_wire.hpp"

namespace kvferry::transport::verbs {

namespace {

/// A batch the sender may be writing: what it holds busy here.
struct admitted_batch {
  uint64_t seq;
  uint64_t fence;
  std::vector<region_id> regions;
};

status send_verdict(int fd, uint32_t magic, uint64_t seq, const status& st,
                    const std::vector<region_info>& regions) {
  verdict v;
  v.magic = magic;
  v.seq = seq;
  v.code = static_cast<uint8_t>(st.error_code());
  auto msg = st.message().substr(0, max_verdict_message);
  v.message_len = static_cast<uint32_t>(msg.size());
  v.n_regions = static_cast<uint32_t>(regions.size());
  std::vector<iovec> iov{
      {&v, sizeof(v)},
      {msg.data(), msg.size()},
      {const_cast<region_info*>(regions.data()), regions.size() * sizeof(region_info)}};
  return write_all(fd, iov);
}

}  // namespace

result<std::unique_ptr<verbs_receiver>> verbs_receiver::start(std::shared_ptr<device> dev,
                                                              const std::string& host,
                                                              uint16_t port, verbs_regions& regions,
                                                              fence_table& fences,
                                                              const peer_key& key) {
  auto listening = listen_on(host, port);
  if (!listening.ok())
    return listening.error();
  ibv_cq* cq = ::ibv_create_cq(dev->context, 16, nullptr, nullptr, 0);
  if (cq == nullptr)
    return status::io_error("verbs: ibv_create_cq for the receiver on " + dev->name + " failed");
  auto [fd, bound] = std::move(listening).value();
  return std::unique_ptr<verbs_receiver>{
      new verbs_receiver(std::move(dev), cq, std::move(fd), host, bound, regions, fences, key)};
}

verbs_receiver::verbs_receiver(std::shared_ptr<device> dev, ibv_cq* cq, socket_fd listener,
                               const std::string& host, uint16_t port, verbs_regions& regions,
                               fence_table& fences, const peer_key& key)
    : dev_(std::move(dev)),
      cq_(cq),
      regions_(regions),
      fences_(fences),
      key_(key),
      listener_(std::move(listener)),
      port_(port),
      endpoint_(format_endpoint("verbs", host, port)) {
  acceptor_ = std::thread{[this] { accept_loop(); }};
}

verbs_receiver::~verbs_receiver() {
  stopping_ = true;
  listener_.shutdown();
  acceptor_.join();
  conns_.stop();
  ::ibv_destroy_cq(cq_);
}

void verbs_receiver::accept_loop() {
  conns_.accept_tcp(listener_.get(), stopping_, [this](connection& c) { serve(c); });
}

void verbs_receiver::disconnect(const std::string& endpoint) {
  conns_.disconnect(endpoint, [](connection& c) { c.fd.shutdown(); });
}

void verbs_receiver::serve(connection& conn) {
  int fd = conn.fd.get();
  hello h;
  if (!conns_.greet(conn, h, max_name, key_, endpoint_))
    return;
  const std::string sender = conn.sender;  // set by greet(), fixed from now on
  auto qp = make_rc_qp(*dev_, cq_, 1, 1);
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
  std::deque<admitted_batch> admitted;
  std::set<region_id> told;  // regions whose addr/rkey this sender has
  std::vector<op_header> ops;
  auto release = [&](admitted_batch& b) {
    fences_.leave(b.fence);
    regions_.unpin(b.regions);
  };
  for (;;) {
    frame f;
    if (!read_exact(fd, &f, sizeof(f)).ok())
      break;
    if (f.magic == end_magic) {
      // Ends come in begin order; anything else means the peer lost track.
      if (admitted.empty() || admitted.front().seq != f.seq)
        break;
      release(admitted.front());
      admitted.pop_front();
      if (!send_verdict(fd, released_magic, f.seq, {}, {}).ok())
        break;
      continue;
    }
    if (f.magic != begin_magic || f.n_ops > max_ops_per_batch || !read_items(fd, ops, f.n_ops).ok())
      break;
    status verdict_status;
    admitted_batch batch{f.seq, f.fence, {}};
    std::vector<region_info> news;
    if (auto admitted_st = fences_.enter(f.fence, sender, ops); !admitted_st.ok()) {
      verdict_status = std::move(admitted_st);
    } else {
      for (auto& op : ops)
        if (std::find(batch.regions.begin(), batch.regions.end(), op.region) == batch.regions.end())
          batch.regions.push_back(op.region);
      // Pin first, then look up: a region found here stays registered until
      // the batch is released.
      regions_.pin(batch.regions);
      for (auto& op : ops) {
        auto dst = regions_.find(op.region, op.offset, op.length, "receiver");
        if (!dst.ok()) {
          verdict_status = dst.error();
          break;
        }
      }
      for (auto id : batch.regions) {
        if (!verdict_status.ok() || told.count(id) != 0)
          continue;
        auto length = regions_.length_of(id);
        auto whole = regions_.find(id, 0, length, "receiver");
        if (!whole.ok()) {
          verdict_status = whole.error();
          break;
        }
        news.push_back(
            region_info{id, whole->rkey, reinterpret_cast<uint64_t>(whole->addr), length});
      }
      if (!verdict_status.ok()) {
        release(batch);
        news.clear();
      }
    }
    if (verdict_status.ok()) {
      for (auto& r : news)
        told.insert(r.region);
      admitted.push_back(std::move(batch));
    }
    if (!send_verdict(fd, verdict_magic, f.seq, verdict_status, news).ok())
      break;
  }
  // Nothing of an admitted batch may land once it is released.
  break_qp(**qp);
  for (auto& b : admitted)
    release(b);
}

}  // namespace kvferry::transport::verbs
