// The sending half of the shm backend: one connection to one peer's receiver
// and one thread that, per batch in post order, asks the receiver to admit it
// (a few batches ahead), copies its bytes straight into the peer's memory
// (mapped from the memfds the receiver granted), and tells the receiver it is
// done. A lost connection fails exactly the batches begun on it; the next batch
// reconnects.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "transport/base/region_table.hpp"
#include "transport/base/wire_hello.hpp"
#include "transport/shm/shm_socket.hpp"
#include "transport/shm/shm_wire.hpp"
#include "transport/write_op.hpp"

namespace kvferry::transport::shm {

class shm_sender {
 public:
  /// `local` (the transport's regions) must outlive the sender; `complete` is
  /// called once per posted batch, from the sender's thread. `socket_name` is
  /// the peer's abstract socket, `endpoint` its endpoint (for messages),
  /// `who`: our own endpoint (so the receiver knows whose connection it is)
  /// and the credential the receiver gave for it.
  shm_sender(std::string socket_name, std::string endpoint, sender_identity who,
             const region_table& local, device_copier* device,
             std::function<void(completion)> complete);

  shm_sender(const shm_sender&) = delete;
  shm_sender& operator=(const shm_sender&) = delete;

  /// Finishes the copy in progress, fails the rest with shut_down, closes the
  /// connection and joins the thread.
  ~shm_sender();

  /// Queues a batch; it completes through `complete`.
  void post(write_batch batch);

 private:
  /// A peer region this connection mapped.
  struct mapped_region {
    std::byte* base;   ///< the region's first byte in our mapping
    uint64_t length;   ///< the region's length, as granted
    void* map_base;    ///< what to munmap (null for device memory)
    uint64_t map_len;  ///< and how much
    /// Device memory: the copier's mapping of the peer's handle (released to unmap).
    std::shared_ptr<std::byte> device;
    /// Host memory pinned with the device copier, so that copies from device
    /// memory into it go straight to it.
    bool pinned = false;
  };

  /// A batch taken off the queue, in post order, and how far it got:
  ///   awaiting_reply → admitted → (copy, end) → awaiting_release → done
  /// or done at once when refused here or by the receiver.
  struct pending_batch {
    enum class stage { awaiting_reply, admitted, awaiting_release, done };
    write_batch batch;
    uint64_t seq = 0;
    stage at = stage::awaiting_reply;
    status result;  ///< the outcome once done (or the copy's, while awaiting release)
  };

  void run();
  /// Waits for a post, a stop, or (connected and idle) the peer's hang-up.
  void wait_idle();
  status connect();
  /// Sends begin for `b`, or refuses it locally.
  void begin(pending_batch& b);
  /// Reads one message of the receiver and applies it; a link error if the
  /// connection is unusable.
  status read_message();
  /// The pending batch begun as `seq`, or null.
  pending_batch* find_pending(uint64_t seq);
  status map_grant(int fd, uint64_t region, uint64_t length, uint64_t file_offset);
  /// Reads a device grant's handle and opens it with the device copier.
  status map_device_grant(const device_grant& g);
  /// Copies an admitted batch into the peer's mapped regions.
  status copy(const write_batch& batch);
  /// Closes the connection; fails every batch begun on it with `why`.
  void drop(const status& why);
  void unmap_all();
  /// Unpins and unmaps one mapping (device mappings close with their pointer).
  void unmap(mapped_region& m);
  void fail(uint64_t cookie, const status& why) { complete_(completion{cookie, why}); }

  const std::string socket_name_;
  const std::string endpoint_;
  const sender_identity who_;
  const region_table& local_;
  device_copier* const device_;
  const std::function<void(completion)> complete_;

  // Owned by the sender's thread.
  std::deque<pending_batch> pending_;
  std::map<region_id, mapped_region> mapped_;
  uint64_t next_seq_ = 1;
  bool connected_ = false;

  std::mutex mu_;  // guards everything below
  std::deque<write_batch> queue_;
  socket_fd fd_;    // written by the thread under mu_; shut down by the destructor
  socket_fd wake_;  // eventfd: a post or a stop while the thread waits on the socket
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace kvferry::transport::shm
