#include "transport/tcp/tcp_receiver.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "transport/base/socket_runs.hpp"
#include "transport/base/wire_hello.hpp"
#include "transport/tcp/tcp_wire.hpp"

namespace kvferry::transport::tcp {

namespace {

status send_ack(int fd, uint64_t cookie, const status& st) {
  ack_header ack;
  ack.cookie = cookie;
  ack.code = static_cast<uint8_t>(st.error_code());
  auto msg = st.message().substr(0, max_ack_message);
  ack.message_len = static_cast<uint32_t>(msg.size());
  std::vector<iovec> iov{{&ack, sizeof(ack)}, {msg.data(), msg.size()}};
  return write_all(fd, iov);
}

}  // namespace

result<std::unique_ptr<tcp_receiver>> tcp_receiver::start(const std::string& host, uint16_t port,
                                                          socket_tuning tuning,
                                                          const region_table& regions,
                                                          fence_table& fences, const peer_key& key,
                                                          std::shared_ptr<device_copier> device) {
  auto acceptor = tcp_acceptor::listen("tcp", host, port, tuning.buffer_bytes);
  if (!acceptor.ok())
    return acceptor.error();
  return std::unique_ptr<tcp_receiver>{new tcp_receiver(std::move(acceptor).value(), regions,
                                                        fences, key, std::move(device),
                                                        tuning.user_timeout_ms)};
}

tcp_receiver::tcp_receiver(std::unique_ptr<tcp_acceptor> acceptor, const region_table& regions,
                           fence_table& fences, const peer_key& key,
                           std::shared_ptr<device_copier> device, int user_timeout_ms)
    : regions_(regions),
      fences_(fences),
      key_(key),
      device_(std::move(device)),
      user_timeout_ms_(user_timeout_ms),
      acceptor_(std::move(acceptor)) {
  acceptor_->serve([this](connection& c) { serve(c); });
}

// The connections end before the members their threads use.
tcp_receiver::~tcp_receiver() {
  acceptor_->stop();
}

void tcp_receiver::serve(connection& conn) {
  int fd = conn.fd.get();
  set_user_timeout(fd, user_timeout_ms_);
  hello h;
  if (!acceptor_->connections().greet(conn, h, max_name, key_, endpoint()))
    return;
  const std::string sender = conn.sender;  // set by greet(), fixed from now on
  std::vector<op_header> ops;
  std::vector<memory_run> runs;
  for (;;) {
    batch_header bh;
    if (!read_exact(fd, &bh, sizeof(bh)).ok())
      return;
    // A frame we cannot parse leaves the stream unsynchronised: drop this
    // connection only. The ops are read as they arrive (read_items): a
    // header that announces many allocates nothing before their bytes.
    if (bh.magic != batch_magic || bh.n_ops > max_ops_per_batch ||
        !read_items(fd, ops, bh.n_ops).ok())
      return;
    uint64_t sum = 0;
    for (auto& op : ops) {
      if (op.length > UINT64_MAX - sum)
        return;
      sum += op.length;
    }
    if (sum != bh.payload_bytes)
      return;
    status answer;
    bool payload_read = false;
    {
      // The fence is checked and held for the whole batch: once closed,
      // nothing of a later batch with it lands, and close() knows whether
      // this one is still writing.
      fence_pass pass{fences_, bh.fence, sender, ops};
      if (!pass.admitted())
        answer = pass.refusal();
      auto held = regions_.guard();
      runs.clear();
      for (auto& op : ops) {
        if (!answer.ok())
          break;
        auto dst = regions_.resolve(held, op.region, op.offset, op.length, "receiver");
        if (!dst.ok()) {
          answer = dst.error();
          break;
        }
        // Ops contiguous in memory are read as one run.
        append_run(runs, *dst, op.length, regions_.kind_of(held, op.region));
      }
      if (answer.ok()) {
        auto got = receive_runs(fd, runs, device_.get());
        if (!got.link.ok())
          return;
        // A device copy that failed: the rest of the batch was read off the
        // stream, and only this batch is refused.
        answer = got.placed;
        payload_read = true;
      }
    }
    if (!answer.ok() && !payload_read && !discard_exact(fd, bh.payload_bytes).ok())
      return;
    if (!send_ack(fd, bh.cookie, answer).ok())
      return;
  }
}

}  // namespace kvferry::transport::tcp
