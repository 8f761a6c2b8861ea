// The receiving side of admission (admission_wire.hpp), the loop shm and verbs
// share on each control connection once its sender said hello: read a frame,
// bound it, enter the batch's fence, have the backend check the batch's
// regions, answer each begin in order, release a batch at its end, and once
// the connection is over release what it still held. What a backend adds
// comes in as callables: how its regions are checked and pinned, what it
// sends with a reply (shm: memfd grants before it; verbs: op_grant
// records after it), and what must stop before an admitted batch is released
// (shm: the peer's copies; verbs: the queue pair).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "transport/base/admission_wire.hpp"
#include "transport/base/fence_table.hpp"
#include "transport/base/op_header.hpp"
#include "transport/region.hpp"
#include "transport/status.hpp"

namespace kvferry::transport::admission {

/// A begun batch the fence admitted, as the backend checks it.
struct begun_batch {
  const std::vector<op_header>& ops;
  const std::vector<region_id>& regions;  ///< each region its ops name, once, in op order
};

/// What a backend does in serve().
struct backend_part {
  magics wire{};  ///< the backend's magic numbers

  /// Checks every op of `b` against the backend's regions. ok: the regions
  /// are pinned (until unpin()) and what answer() sends with the reply is
  /// ready; an error (the reply): nothing is pinned.
  std::function<status(const begun_batch& b)> check;

  /// Answers begin `seq` with `reply` (check()'s, or the fence's refusal,
  /// check() not called): what the backend sends (send_reply() among it),
  /// then forgets what check() prepared. An error ends the connection.
  std::function<status(uint64_t seq, const status& reply)> answer;

  /// Ends the pins of an admitted batch's regions.
  std::function<void(const std::vector<region_id>& regions)> unpin;

  /// Runs once the connection is over, before the batches still admitted are
  /// released: makes sure nothing of them lands later.
  std::function<void()> quiesce;

  /// Once set (shm's disconnect()): answer nothing more, but read on, so that
  /// ends still release their batches. Null: always answer.
  const std::atomic<bool>* muted = nullptr;
};

/// Serves admission on `fd` to `sender` (the endpoint its hello named) until
/// the connection ends, the sender breaks the protocol (an unknown magic, more
/// than max_ops_per_batch ops, an end that is not for the oldest admitted
/// batch) or an answer cannot be sent; then quiesce() and release every batch
/// still admitted (its regions unpinned, then its fence left).
void serve(int fd, fence_table& fences, const std::string& sender, const backend_part& part);

/// Sends a reply with `magic` on batch `seq`: `st`'s code and message (at
/// most max_reply_message bytes of it), then `n_records` records of
/// `record_size` bytes at `records` (counted in n_regions: verbs' op_grant).
status send_reply(int fd, uint32_t magic, uint64_t seq, const status& st,
                  const void* records = nullptr, uint32_t n_records = 0, size_t record_size = 0);

template <class Record>
status send_reply(int fd, uint32_t magic, uint64_t seq, const status& st,
                  const std::vector<Record>& records) {
  return send_reply(fd, magic, seq, st, records.data(), static_cast<uint32_t>(records.size()),
                    sizeof(Record));
}

}  // namespace kvferry::transport::admission
