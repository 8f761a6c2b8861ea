// The sending half of the tcp backend: to one peer, `streams` connections
// (tcp_options::streams), each a tcp_stream with a queue of stripes written in
// order by its writer thread and a reader thread for the peer's acks. A batch
// is split over the streams by remote address (tcp_stripes.hpp): a small one
// usually stays on one stream, a large one is spread over all of them.
//
// What the backend promises (caps::ordered_writes) and how it keeps it:
// - the same byte, written twice (in one batch or two), lands in post order:
//   it travels on the same stream both times (its address picks the stream),
//   and a stream is placed in order by one receiver thread;
// - completions come in post order, one per batch, and a batch completes
//   only once every one of its stripes was acknowledged (or failed), so a
//   completion means every byte of its batch and of the batches before it is
//   in place (the transfer actor's aux row after the KV of a room relies on
//   this). No batch waits for another to be dispatched.
// Faults: a lost connection fails the stripes in flight on it, and so exactly
// the batches that had bytes on it; its queued stripes wait for the
// reconnection its writer makes. Other streams carry on. Refusals (bounds,
// fences, regions) are decided per stripe by the receiver: a refused batch
// that spanned several streams may have had its other stripes written
// (completion allows it: the room fails).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "transport/base/posix_socket.hpp"
#include "transport/base/region_table.hpp"
#include "transport/base/sender_link.hpp"
#include "transport/base/wire_hello.hpp"
#include "transport/write_op.hpp"

namespace kvferry::transport::tcp {

/// The part of one batch that goes on one stream.
struct stripe {
  uint64_t seq = 0;     ///< the batch's number in post order, at its sender
  uint32_t index = 0;   ///< which stripe of the batch (its stream)
  uint64_t cookie = 0;  ///< the batch's cookie, echoed by the receiver's ack
  uint64_t fence = 0;
  std::vector<write_op> ops;
};

/// One connection to a peer: connects on the first stripe (and after a loss),
/// writes queued stripes in order, reads their acks.
class tcp_stream {
 public:
  /// `local` must outlive the stream; `device` (may be null) reads its device
  /// regions. `done` is called once per pushed stripe,
  /// from the stream's threads (or, on destruction, the destroying thread),
  /// never under the stream's lock. `label` names the stream in causes;
  /// `tuning` sets up its socket (buffers, user timeout).
  tcp_stream(host_port where, std::string label, sender_identity who, const region_table& local,
             device_copier* device, socket_tuning tuning,
             std::function<void(const stripe&, status)> done);

  tcp_stream(const tcp_stream&) = delete;
  tcp_stream& operator=(const tcp_stream&) = delete;

  /// Fails what is queued or in flight with shut_down, closes the connection
  /// and joins the threads.
  ~tcp_stream();

  /// Queues a stripe; false (and `s` untouched) once the stream is stopping.
  bool push(stripe& s);

 private:
  void writer_loop();
  void reader_loop(int fd, uint64_t generation);
  /// Connects if needed; on failure fails `first` and everything queued.
  bool ensure_connected(stripe& first);
  /// Fails every stripe in flight on connection `generation`, once.
  void drop(uint64_t generation, const status& why);
  /// Fails the stripe (seq, index) in flight on `generation`, if still there.
  void fail_in_flight(uint64_t generation, std::pair<uint64_t, uint32_t> which, const status& why);

  const host_port where_;
  const std::string label_;    // "tcp peer tcp://h:p" (+ " stream i/n")
  const sender_identity who_;  // our endpoint (sent in the hello) and credential
  const region_table& local_;
  device_copier* const device_;
  const socket_tuning tuning_;
  const std::function<void(const stripe&, status)> done_;

  std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  std::deque<stripe> queue_;
  struct sent {
    stripe s;
    uint64_t generation;
  };
  std::deque<sent> in_flight_;
  sender_link link_;
  bool stopping_ = false;
  std::thread writer_;
};

/// The streams to one peer and the batches posted to it.
class tcp_sender {
 public:
  /// `local` (the transport's regions) and `device` (may be null: no device
  /// regions) must outlive the sender; `complete` is
  /// called once per posted batch, in post order, from the sender's threads
  /// or the posting thread. `who` tells the receiver whose connections
  /// (and proves it: its credential)
  /// these are. `streams` (at least 1) and `tuning` as in options.
  tcp_sender(host_port where, std::string endpoint, sender_identity who, const region_table& local,
             device_copier* device, uint32_t streams, socket_tuning tuning,
             std::function<void(completion)> complete);

  tcp_sender(const tcp_sender&) = delete;
  tcp_sender& operator=(const tcp_sender&) = delete;

  /// Fails what is queued or in flight with shut_down and joins the streams.
  ~tcp_sender();

  /// Splits and queues a batch; it completes through `complete`. Never blocks
  /// on the network.
  void post(write_batch batch);

 private:
  struct batch_state {
    uint64_t cookie = 0;
    uint32_t stripes_left = 0;
    uint32_t failed_stripe = UINT32_MAX;  // lowest stripe that failed: its cause is kept
    status result;
  };

  void stripe_done(const stripe& s, status st);
  /// Hands finished batches at the head to `complete`, in order; one thread
  /// at a time (a call made meanwhile leaves them to that thread).
  void deliver();

  const host_port where_;
  const std::string endpoint_;
  const sender_identity who_;
  const region_table& local_;
  const std::function<void(completion)> complete_;

  std::mutex mu_;                    // guards everything below; taken before a stream's lock
  std::deque<batch_state> batches_;  // not yet delivered, in post order
  uint64_t first_seq_ = 0;           // seq of batches_.front()
  bool delivering_ = false;
  std::vector<std::unique_ptr<tcp_stream>> streams_;  // fixed after construction
};

}  // namespace kvferry::transport::tcp
