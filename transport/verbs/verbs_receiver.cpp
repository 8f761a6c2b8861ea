#include "transport/verbs/verbs_receiver.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <set>
#include <utility>
#include <vector>

#include "transport/base/admission_server.hpp"
#include "transport/base/wire_hello.hpp"
#include "transport/verbs/verbs_qp.hpp"
#include "transport/verbs/verbs_wire.hpp"

namespace kvferry::transport::verbs {

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
  std::set<region_id> told;       // regions whose addr/rkey this sender has
  std::vector<region_info> news;  // what the next reply tells
  admission::backend_part part;
  part.wire = admission_magics;
  part.check = [&](const admission::begun_batch& b) -> status {
    // Pin first, then look up: a region found here stays registered until
    // the batch is released.
    regions_.pin(b.regions);
    auto refuse = [&](status why) {
      regions_.unpin(b.regions);
      news.clear();
      return why;
    };
    for (auto& op : b.ops) {
      auto dst = regions_.find(op.region, op.offset, op.length, "receiver");
      if (!dst.ok())
        return refuse(dst.error());
    }
    for (auto id : b.regions) {
      if (told.count(id) != 0)
        continue;
      auto length = regions_.length_of(id);
      auto whole = regions_.find(id, 0, length, "receiver");
      if (!whole.ok())
        return refuse(whole.error());
      news.push_back(region_info{id, whole->rkey, reinterpret_cast<uint64_t>(whole->addr), length});
    }
    for (auto& r : news)
      told.insert(r.region);
    return {};
  };
  part.answer = [&](uint64_t seq, const status& reply) {
    return admission::send_reply(fd, reply_magic, seq, reply, std::exchange(news, {}));
  };
  part.unpin = [&](const std::vector<region_id>& ids) { regions_.unpin(ids); };
  // Nothing of an admitted batch may land once it is released.
  part.quiesce = [&] { break_qp(**qp); };
  admission::serve(fd, fences_, sender, part);
}

}  // namespace kvferry::transport::verbs
