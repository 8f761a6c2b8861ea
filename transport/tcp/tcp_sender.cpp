#include "transport/tcp/tcp_sender.hpp"

#include <algorithm>
#include <optional>

#include "transport/base/socket_runs.hpp"
#include "transport/base/wire_hello.hpp"
#include "transport/tcp/tcp_stripes.hpp"
#include "transport/tcp/tcp_wire.hpp"

namespace kvferry::transport::tcp {

namespace {

constexpr int connect_timeout_ms = 5000;

}  // namespace

// -- tcp_stream ---------------------------------------------------------------

tcp_stream::tcp_stream(host_port where, std::string label, sender_identity who,
                       const region_table& local, device_copier* device, socket_tuning tuning,
                       std::function<void(const stripe&, status)> done)
    : where_(std::move(where)),
      label_(std::move(label)),
      who_(std::move(who)),
      local_(local),
      device_(device),
      tuning_(tuning),
      done_(std::move(done)) {
  writer_ = std::thread{[this] { writer_loop(); }};
}

tcp_stream::~tcp_stream() {
  std::deque<stripe> queued;
  std::deque<sent> in_flight;
  {
    std::lock_guard guard{mu_};
    stopping_ = true;
    queued.swap(queue_);
    in_flight.swap(in_flight_);
    link_.shut();
  }
  cv_.notify_all();
  writer_.join();
  link_.join_reader();
  auto why = status::shut_down(label_ + ": transport closed");
  for (auto& s : in_flight)
    done_(s.s, why);
  for (auto& s : queued)
    done_(s, why);
}

bool tcp_stream::push(stripe& s) {
  std::lock_guard guard{mu_};
  if (stopping_)
    return false;
  queue_.push_back(std::move(s));
  cv_.notify_one();
  return true;
}

bool tcp_stream::ensure_connected(stripe& first) {
  {
    std::lock_guard guard{mu_};
    if (link_.up())
      return true;
  }
  link_.join_reader();  // the previous connection's (drop() ran)
  auto fd = connect_to(where_, connect_timeout_ms, tuning_.buffer_bytes);
  status st;
  if (fd.ok()) {
    set_user_timeout(fd->get(), tuning_.user_timeout_ms);
    st = introduce(fd->get(), hello{}, who_, max_name);
  } else {
    st = fd.error();
  }
  if (!st.ok()) {
    fail_first_and_queued(mu_, queue_, first, status::connect_failed(label_ + ": " + st.message()),
                          done_);
    return false;
  }
  std::unique_lock guard{mu_};
  if (stopping_) {
    guard.unlock();
    done_(first, status::shut_down(label_ + ": transport closed"));
    return false;
  }
  link_.install(std::move(fd).value(), [this](int raw, uint64_t gen) { reader_loop(raw, gen); });
  return true;
}

void tcp_stream::writer_loop() {
  std::vector<op_header> headers;
  std::vector<memory_run> runs;
  for (;;) {
    stripe s;
    {
      std::unique_lock guard{mu_};
      cv_.wait(guard, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_)
        return;
      s = std::move(queue_.front());
      queue_.pop_front();
    }
    if (!ensure_connected(s))
      continue;
    // Held while the bytes are copied into the socket: a local region is not
    // deregistered under a send.
    auto held = local_.guard();
    headers.clear();
    runs.clear();
    batch_header bh;
    bh.cookie = s.cookie;
    bh.fence = s.fence;
    bh.n_ops = static_cast<uint32_t>(s.ops.size());
    status bad;
    for (auto& op : s.ops) {
      auto src = local_.resolve(held, op.local, op.local_offset, op.length, "local");
      if (!src.ok()) {
        bad = src.error();  // deregistered since post()
        break;
      }
      headers.push_back(op_header{op.remote, 0, op.remote_offset, op.length});
      bh.payload_bytes += op.length;
      // Runs contiguous in local memory are one run, whatever their targets.
      append_run(runs, *src, op.length, local_.kind_of(held, op.local));
    }
    if (!bad.ok()) {
      held.unlock();
      done_(s, bad);
      continue;
    }
    uint64_t gen;
    int fd;
    std::pair<uint64_t, uint32_t> which;  // the stripe's (seq, index)
    {
      std::unique_lock guard{mu_};
      if (stopping_) {
        // The destructor took the queue already: this one is failed here.
        guard.unlock();
        held.unlock();
        done_(s, status::shut_down(label_ + ": transport closed"));
        return;
      }
      if (!link_.up()) {
        // The connection dropped since ensure_connected(): retry this stripe first.
        queue_.push_front(std::move(s));
        continue;
      }
      gen = link_.generation();
      fd = link_.fd();
      which = {s.seq, s.index};
      in_flight_.push_back(sent{std::move(s), gen});
    }
    // The stripe's ops moved into in_flight_; headers and runs point into
    // memory that stays put (the header vector and the regions).
    std::vector<iovec> head{{&bh, sizeof(bh)},
                            {headers.data(), headers.size() * sizeof(op_header)}};
    auto st = send_runs(fd, std::move(head), runs, device_);
    if (st.ok())
      continue;
    if (is_link_error(st.error_code())) {
      drop(gen, status::connection_lost(label_ + ": " + st.message()));
      continue;
    }
    // A device read failed mid-stripe: this stripe fails with its cause; the
    // stream, cut short, is dropped, and the stripes before it on it fail as
    // a lost connection does.
    fail_in_flight(gen, which, status::from(st.error_code(), label_ + ": " + st.message()));
    drop(gen, status::connection_lost(label_ +
                                      ": dropped after a device read failed on a later "
                                      "batch (" +
                                      st.message() + ")"));
  }
}

void tcp_stream::fail_in_flight(uint64_t generation, std::pair<uint64_t, uint32_t> which,
                                const status& why) {
  std::optional<stripe> gone;
  {
    std::lock_guard guard{mu_};
    for (auto i = in_flight_.begin(); i != in_flight_.end(); ++i)
      if (i->generation == generation && i->s.seq == which.first && i->s.index == which.second) {
        gone = std::move(i->s);
        in_flight_.erase(i);
        break;
      }
  }
  if (gone)
    done_(*gone, why);
}

void tcp_stream::reader_loop(int fd, uint64_t generation) {
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
      drop(generation, status::connection_lost(label_ + ": " + st.message()));
      return;
    }
    stripe acked;
    {
      std::lock_guard guard{mu_};
      if (in_flight_.empty() || in_flight_.front().s.cookie != ack.cookie ||
          in_flight_.front().generation != generation) {
        st =
            status::protocol_error("ack for batch " + std::to_string(ack.cookie) + " out of order");
      } else {
        acked = std::move(in_flight_.front().s);
        in_flight_.pop_front();
      }
    }
    if (!st.ok()) {
      drop(generation, status::protocol_error(label_ + ": " + st.message()));
      return;
    }
    auto result = static_cast<code>(ack.code);
    done_(acked, result == code::ok ? status{} : status::from(result, label_ + ": " + message));
  }
}

void tcp_stream::drop(uint64_t generation, const status& why) {
  std::vector<stripe> lost;
  {
    std::lock_guard guard{mu_};
    link_.lose(generation);
    for (auto i = in_flight_.begin(); i != in_flight_.end();) {
      if (i->generation == generation) {
        lost.push_back(std::move(i->s));
        i = in_flight_.erase(i);
      } else {
        ++i;
      }
    }
  }
  for (auto& s : lost)
    done_(s, why);
}

// -- tcp_sender ---------------------------------------------------------------

tcp_sender::tcp_sender(host_port where, std::string endpoint, sender_identity who,
                       const region_table& local, device_copier* device, uint32_t streams,
                       socket_tuning tuning, std::function<void(completion)> complete)
    : where_(std::move(where)),
      endpoint_(std::move(endpoint)),
      who_(std::move(who)),
      local_(local),
      complete_(std::move(complete)) {
  streams = std::max<uint32_t>(1, streams);
  for (uint32_t i = 0; i < streams; ++i) {
    auto label = "tcp peer " + endpoint_;
    if (streams > 1)
      label += " stream " + std::to_string(i + 1) + "/" + std::to_string(streams);
    streams_.push_back(std::make_unique<tcp_stream>(
        where_, std::move(label), who_, local_, device, tuning,
        [this](const stripe& s, status st) { stripe_done(s, std::move(st)); }));
  }
}

tcp_sender::~tcp_sender() {
  // Each stream fails what it still holds (through stripe_done) as it goes.
  for (auto& s : streams_)
    s.reset();
  deliver();
}

void tcp_sender::post(write_batch batch) {
  auto n = static_cast<uint32_t>(streams_.size());
  status bad;
  std::vector<std::vector<write_op>> parts;
  if (batch.ops.size() > max_ops_per_batch) {
    bad =
        status::invalid_argument(std::to_string(batch.ops.size()) + " ops in one batch, at most " +
                                 std::to_string(max_ops_per_batch));
  } else {
    // Refused here, before any byte leaves: a read past a local region.
    auto held = local_.guard();
    for (auto& op : batch.ops)
      if (auto src = local_.resolve(held, op.local, op.local_offset, op.length, "local");
          !src.ok()) {
        bad = src.error();
        break;
      }
  }
  if (bad.ok()) {
    parts = split_batch(batch.ops, n);
    for (auto& p : parts)
      if (p.size() > max_ops_per_batch)
        bad = status::invalid_argument(std::to_string(p.size()) +
                                       " ops on one stream after splitting at " +
                                       std::to_string(stripe_granule) + " B granules, at most " +
                                       std::to_string(max_ops_per_batch));
  }
  {
    std::lock_guard guard{mu_};
    auto seq = first_seq_ + batches_.size();
    auto& b = batches_.emplace_back();
    b.cookie = batch.cookie;
    b.result = bad;
    if (bad.ok()) {
      // An empty batch still goes to the receiver, which checks its fence.
      bool empty = std::all_of(parts.begin(), parts.end(), [](auto& p) { return p.empty(); });
      for (uint32_t i = 0; i < n; ++i) {
        if (parts[i].empty() && !(empty && i == 0))
          continue;
        stripe s{seq, i, batch.cookie, batch.fence, std::move(parts[i])};
        if (streams_[i]->push(s)) {
          ++b.stripes_left;
        } else if (b.failed_stripe == UINT32_MAX) {
          b.failed_stripe = i;
          b.result = status::shut_down("tcp peer " + endpoint_ + ": transport closed");
        }
      }
    }
  }
  deliver();
}

void tcp_sender::stripe_done(const stripe& s, status st) {
  {
    std::lock_guard guard{mu_};
    auto& b = batches_.at(s.seq - first_seq_);
    if (!st.ok() && s.index < b.failed_stripe) {
      b.failed_stripe = s.index;
      b.result = std::move(st);
    }
    if (--b.stripes_left > 0)
      return;
  }
  deliver();
}

void tcp_sender::deliver() {
  std::vector<completion> ready;
  {
    std::lock_guard guard{mu_};
    if (delivering_)
      return;  // that thread's loop picks up what is ready now
    delivering_ = true;
  }
  for (;;) {
    {
      std::lock_guard guard{mu_};
      while (!batches_.empty() && batches_.front().stripes_left == 0) {
        ready.push_back(completion{batches_.front().cookie, std::move(batches_.front().result)});
        batches_.pop_front();
        ++first_seq_;
      }
      if (ready.empty()) {
        delivering_ = false;
        return;
      }
    }
    for (auto& c : ready)
      complete_(std::move(c));
    ready.clear();
  }
}

}  // namespace kvferry::transport::tcp
