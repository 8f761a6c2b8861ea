// The sending half of the verbs backend: one side channel and one RC queue
// pair to one peer. A worker thread takes batches in post order, checks their
// local ops and asks the receiver to admit them (begin); a reader thread takes
// the receiver's replies, which name for each op the remote address and rkey
// to write with (a memory window's over exactly the batch's bytes, or the
// region's: verbs_options::windows), and posts the batch as linked RDMA WRITE
// work requests, coalesced
// and selectively signalled; a completion thread sleeps on the completion
// channel, and on a batch's last completion tells the receiver it is done
// (end). The batch completes when the receiver released it. An error
// completion fails exactly the batches on that queue pair; the next batch
// connects a new one.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "transport/base/posix_socket.hpp"
#include "transport/base/sender_link.hpp"
#include "transport/base/wire_hello.hpp"
#include "transport/verbs/verbs_device.hpp"
#include "transport/verbs/verbs_qp.hpp"
#include "transport/verbs/verbs_regions.hpp"
#include "transport/verbs/verbs_wire.hpp"
#include "transport/write_op.hpp"

namespace kvferry::transport::verbs {

class verbs_sender {
 public:
  /// Creates the completion queue and channel and starts the threads.
  static result<std::unique_ptr<verbs_sender>> start(std::shared_ptr<device> dev, host_port where,
                                                     std::string endpoint, sender_identity who,
                                                     verbs_regions& local,
                                                     std::function<void(completion)> complete);

  verbs_sender(const verbs_sender&) = delete;
  verbs_sender& operator=(const verbs_sender&) = delete;

  /// Fails what is queued or in flight with shut_down, breaks the queue pair
  /// and joins the threads.
  ~verbs_sender();

  /// Queues a batch; it completes through `complete`.
  void post(write_batch batch);

 private:
  /// A batch begun at the receiver, until it is released.
  struct pending {
    write_batch batch;
    uint64_t generation = 0;
    std::vector<region_id> pinned;  // local regions the NIC may read
    std::vector<mr_span> src;       // each op's local bytes
    std::deque<uint32_t> chunks;    // WRs of each signalled chunk still on the queue pair
    bool all_posted = false;        // the last chunk is on the queue pair
    status result;                  // the outcome, reported once released
  };

  verbs_sender(std::shared_ptr<device> dev, ibv_comp_channel* channel, ibv_cq* cq, int wake,
               host_port where, std::string endpoint, sender_identity who, verbs_regions& local,
               std::function<void(completion)> complete);

  void worker_loop();
  void reader_loop(int fd, uint64_t generation);
  void completion_loop();
  bool ensure_connected(write_batch& first);
  status handshake(int fd);
  /// Posts batch `seq`'s writes where the receiver granted them, `grants`
  /// (one per op, as many as the batch has: checked by the caller), waiting,
  /// under `held`, for room on the send queue.
  /// nothing: no write to post, or a refusal (then in the batch's result).
  enum class posted { all, nothing, broken };
  posted write(std::unique_lock<std::mutex>& held, uint64_t seq, uint64_t generation,
               const std::vector<op_grant>& grants, status& broken_why);
  status send_frame(uint32_t magic, uint64_t seq, uint64_t fence,
                    const std::vector<op_header>& headers);
  void drop(uint64_t generation, const status& why);
  void finish(uint64_t seq, status why);
  void fail(uint64_t cookie, const status& why) { complete_(completion{cookie, why}); }
  std::string peer() const { return "verbs peer " + endpoint_; }

  const std::shared_ptr<device> dev_;
  ibv_comp_channel* const channel_;
  ibv_cq* const cq_;
  const int wake_;  // eventfd: wakes the completion thread to stop
  const host_port where_;
  const std::string endpoint_;
  const sender_identity who_;
  verbs_regions& local_;
  const std::function<void(completion)> complete_;
  const uint32_t depth_;
  const uint32_t max_sge_;

  std::mutex write_mu_;  // one writer of the side channel at a time

  std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  std::deque<write_batch> queue_;
  std::map<uint64_t, pending> pending_;  // by seq
  uint64_t next_seq_ = 1;
  sender_link link_;  // the side channel
  qp_ptr qp_;
  qp_info local_qp_{};
  bool stopping_ = false;
  uint32_t sq_used_ = 0;  // WRs on the current queue pair not yet completed
  std::thread worker_;
  std::thread completer_;
};

}  // namespace kvferry::transport::verbs
