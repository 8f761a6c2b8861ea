#include "transport/tcp/tcp_sender.hpp"

#include <algorithm>

#include "transport/tcp/tcp_wire.hpp"
#include "transport/wire_hello.hpp"

namespace kvferry::transport::tcp {

namespace {

constexpr int connect_timeout_ms = 5000;

}  // namespace

tcp_sender::tcp_sender(host_port where, std::string endpoint, std::string self_name,
                       const region_table& local, std::function<void(completion)> complete)
    : where_(std::move(where)),
      endpoint_(std::move(endpoint)),
      self_name_(std::move(self_name)),
      local_(local),
      complete_(std::move(complete)) {
  writer_ = std::thread{[this] { writer_loop(); }};
}

tcp_sender::~tcp_sender() {
  std::deque<write_batch> queued;
  std::deque<std::pair<uint64_t, uint64_t>> in_flight;
  {
    std::lock_guard guard{mu_};
    stopping_ = true;
    queued.swap(queue_);
    in_flight.swap(in_flight_);
    fd_.shutdown();
  }
  cv_.notify_all();
  writer_.join();
  if (reader_.joinable())
    reader_.join();
  auto why = status::shut_down("tcp peer " + endpoint_ + ": transport closed");
  for (auto& b : queued)
    fail(b.cookie, why);
  for (auto& [cookie, gen] : in_flight)
    fail(cookie, why);
}

void tcp_sender::post(write_batch batch) {
  {
    std::lock_guard guard{mu_};
    if (!stopping_) {
      queue_.push_back(std::move(batch));
      cv_.notify_one();
      return;
    }
  }
  fail(batch.cookie, status::shut_down("tcp peer " + endpoint_ + ": transport closed"));
}

bool tcp_sender::ensure_connected(write_batch& first) {
  {
    std::lock_guard guard{mu_};
    if (connected_)
      return true;
  }
  // The previous connection's reader has ended (drop() ran); join it before
  // its socket is replaced.
  if (reader_.joinable())
    reader_.join();
  auto fd = connect_to(where_, connect_timeout_ms);
  status st;
  if (fd.ok()) {
    st = send_hello(fd->get(), hello{}, self_name_, max_name);
  } else {
    st = fd.error();
  }
  if (!st.ok()) {
    auto why = status::connect_failed("tcp peer " + endpoint_ + ": " + st.message());
    std::deque<write_batch> queued;
    {
      std::lock_guard guard{mu_};
      queued.swap(queue_);
    }
    fail(first.cookie, why);
    for (auto& b : queued)
      fail(b.cookie, why);
    return false;
  }
  std::unique_lock guard{mu_};
  if (stopping_) {
    guard.unlock();
    fail(first.cookie, status::shut_down("tcp peer " + endpoint_ + ": transport closed"));
    return false;
  }
  fd_ = std::move(fd).value();
  connected_ = true;
  auto gen = ++generation_;
  reader_ = std::thread{[this, raw = fd_.get(), gen] { reader_loop(raw, gen); }};
  return true;
}

void tcp_sender::writer_loop() {
  std::vector<op_header> headers;
  std::vector<iovec> iov;
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
    if (!ensure_connected(batch))
      continue;
    auto held = local_.guard();
    headers.clear();
    iov.clear();
    batch_header bh;
    bh.cookie = batch.cookie;
    bh.fence = batch.fence;
    bh.n_ops = static_cast<uint32_t>(batch.ops.size());
    status bad;
    iov.push_back({&bh, sizeof(bh)});
    for (auto& op : batch.ops) {
      auto src = local_.resolve(held, op.local, op.local_offset, op.length, "local");
      if (!src.ok()) {
        bad = src.error();
        break;
      }
      headers.push_back(op_header{op.remote, 0, op.remote_offset, op.length});
      bh.payload_bytes += op.length;
      if (op.length > 0)
        iov.push_back({*src, op.length});
    }
    if (!bad.ok() || batch.ops.size() > max_ops_per_batch) {
      if (bad.ok())
        bad = status::invalid_argument(std::to_string(batch.ops.size()) +
                                       " ops in one batch, at most " +
                                       std::to_string(max_ops_per_batch));
      fail(batch.cookie, bad);
      continue;
    }
    iov.insert(iov.begin() + 1, iovec{headers.data(), headers.size() * sizeof(op_header)});
    uint64_t gen;
    int fd;
    {
      std::lock_guard guard{mu_};
      if (!connected_) {
        // The connection dropped since ensure_connected(): retry this batch first.
        queue_.push_front(std::move(batch));
        continue;
      }
      gen = generation_;
      fd = fd_.get();
      in_flight_.emplace_back(batch.cookie, gen);
    }
    if (auto st = write_all(fd, iov); !st.ok())
      drop(gen, status::connection_lost("tcp peer " + endpoint_ + ": " + st.message()));
  }
}

void tcp_sender::reader_loop(int fd, uint64_t generation) {
  std::string message;
  for (;;) {
    ack_header ack;
    auto st = read_exact(fd, &ack, sizeof(ack));
    if (st.ok() && (ack.magic != ack_magic || ack.message_len > max_ack_message))
      st = status::protocol_error("malformed ack");
    if (st.ok()) {
      message.resize(ack.message_len);
      st = read_exact(fd, message.data(), message.size());
    }
    if (!st.ok()) {
      drop(generation, status::connection_lost("tcp peer " + endpoint_ + ": " + st.message()));
      return;
    }
    {
      std::lock_guard guard{mu_};
      if (in_flight_.empty() || in_flight_.front().first != ack.cookie ||
          in_flight_.front().second != generation) {
        st =
            status::protocol_error("ack for batch " + std::to_string(ack.cookie) + " out of order");
      } else {
        in_flight_.pop_front();
      }
    }
    if (!st.ok()) {
      drop(generation, status::protocol_error("tcp peer " + endpoint_ + ": " + st.message()));
      return;
    }
    auto result = static_cast<code>(ack.code);
    complete_(completion{ack.cookie,
                         result == code::ok
                             ? status{}
                             : status::from(result, "tcp peer " + endpoint_ + ": " + message)});
  }
}

void tcp_sender::drop(uint64_t generation, const status& why) {
  std::vector<uint64_t> lost;
  {
    std::lock_guard guard{mu_};
    if (generation == generation_ && connected_) {
      connected_ = false;
      fd_.shutdown();
    }
    for (auto i = in_flight_.begin(); i != in_flight_.end();) {
      if (i->second == generation) {
        lost.push_back(i->first);
        i = in_flight_.erase(i);
      } else {
        ++i;
      }
    }
  }
  for (auto cookie : lost)
    fail(cookie, why);
}

}  // namespace kvferry::transport::tcp
