// The sending half of the tcp backend: one connection to one peer, a queue of
// batches written in order by a writer thread, and a reader thread for the
// peer's acks. A lost connection fails exactly the batches in flight on it;
// the next batch reconnects.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "transport/posix_socket.hpp"
#include "transport/region.hpp"
#include "transport/write_op.hpp"

namespace kvferry::transport::tcp {

class tcp_sender {
 public:
  /// `local` (the transport's regions) must outlive the sender; `complete` is
  /// called once per posted batch, from the sender's threads. `self_name`
  /// tells the receiver whose connection this is.
  tcp_sender(host_port where, std::string endpoint, std::string self_name,
             const region_table& local, std::function<void(completion)> complete);

  tcp_sender(const tcp_sender&) = delete;
  tcp_sender& operator=(const tcp_sender&) = delete;

  /// Fails what is queued or in flight with shut_down, closes the connection
  /// and joins the threads.
  ~tcp_sender();

  /// Queues a batch; it completes through `complete`.
  void post(write_batch batch);

 private:
  void writer_loop();
  void reader_loop(int fd, uint64_t generation);
  /// Tries to connect; on failure fails `first` and everything queued.
  bool ensure_connected(write_batch& first);
  /// Fails every batch in flight on connection `generation`, once.
  void drop(uint64_t generation, const status& why);
  void fail(uint64_t cookie, const status& why) { complete_(completion{cookie, why}); }

  const host_port where_;
  const std::string endpoint_;
  const std::string self_name_;  // our own endpoint, sent in the hello
  const region_table& local_;
  const std::function<void(completion)> complete_;

  std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  std::deque<write_batch> queue_;
  std::deque<std::pair<uint64_t, uint64_t>> in_flight_;  // (cookie, connection generation)
  socket_fd fd_;
  uint64_t generation_ = 0;
  bool connected_ = false;
  bool stopping_ = false;
  std::thread reader_;
  std::thread writer_;
};

}  // namespace kvferry::transport::tcp
