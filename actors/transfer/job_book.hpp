// The transfer actor's book of jobs and batches, plain logic (no CAF): every
// chunk job under its id, every posted batch under its cookie, and the KV
// batches in flight per room and peer (a last chunk's states and aux row wait
// for them where the backend does not order writes). Ids and cookies come
// from one counter, so "every batch posted since" is a range of cookies.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "messages/failure.hpp"
#include "messages/ids.hpp"
#include "messages/staging.hpp"
#include "messages/transfer.hpp"

namespace kvferry {

/// One chunk job to one destination rank, as far as it got.
struct transfer_job {
  chunk_job meta;
  uint64_t bytes = 0;        ///< bytes of its batches posted so far
  uint32_t writes = 0;       ///< transport writes of its batches posted so far
  uint32_t pending = 0;      ///< batches posted and not completed
  bool aux_waiting = false;  ///< aux batch deferred until the room's KV has landed
  failure why;               ///< the first failure; the job is failed once set
  // Staged jobs: the ring space granted, the gather space taken while the
  // bulk write runs, and the block's bytes.
  bool staged = false;
  bool posted = false;  ///< its bulk write went out (or failed trying)
  bool waited = false;  ///< granted, it had to wait for the ring's watermark or gather space
  std::optional<staging_grant> grant;
  std::optional<uint64_t> gather;
  uint64_t staged_bytes = 0;
  std::vector<uint64_t> digests;  ///< of its source rows, when the peer checks them

  /// Records `f` unless the job failed already (the first cause stays).
  void fail(failure f) {
    if (!why)
      why = std::move(f);
  }

  /// Nothing in flight and nothing waited for: its result may go.
  bool done() const { return pending == 0 && !aux_waiting; }

  /// The chunk_result of this job, its failure included.
  chunk_result result() const;
};

class job_book {
 public:
  /// What a completion did to the book.
  struct completion {
    uint64_t job = 0;        ///< the job the batch belonged to
    bool aux = false;        ///< it was the job's states-and-aux batch
    bool kv_landed = false;  ///< it was the last KV batch in flight of its room and peer
  };

  /// Draws the next id, for a job or a batch's cookie.
  uint64_t draw() { return next_id_++; }

  /// The id the next draw() returns: the first cookie a handler may post.
  uint64_t next() const { return next_id_; }

  /// The job of `id`, made empty if new.
  transfer_job& open(uint64_t id) { return jobs_[id]; }

  /// The job of `id`, or nullptr once it finished or was abandoned.
  transfer_job* find(uint64_t id);

  /// The job of `id`; throws std::out_of_range if there is none.
  transfer_job& at(uint64_t id) { return jobs_.at(id); }

  /// Forgets job `id` (its result went); its batches must be done.
  void close(uint64_t id) { jobs_.erase(id); }

  /// Records a batch of job `id` about to be posted (`bytes` and `writes` go
  /// to the job; a KV batch counts in flight for its room and peer). Returns
  /// its cookie.
  uint64_t add_batch(uint64_t id, uint64_t bytes, uint32_t writes, bool aux);

  /// The transport refused batch `cookie`: no completion will come for it.
  void refused(uint64_t cookie);

  /// Batch `cookie` completed; nullopt if the book does not know it (its job
  /// was abandoned). Throws std::out_of_range if its job is gone.
  std::optional<completion> complete(uint64_t cookie);

  /// The job batch `cookie` belongs to, if it is still in flight.
  std::optional<uint64_t> job_of(uint64_t cookie) const;

  /// True while KV batches of `room` to `peer` are in flight.
  bool kv_in_flight(const room_key& room, const rank_ref& peer) const {
    return kv_in_flight_.count({room, peer}) > 0;
  }

  /// Forgets job `id` half way (a handler threw): its batches, and the KV it
  /// counted in flight. A completion that still comes for one is ignored.
  void abandon(uint64_t id);

  /// The rooms of the jobs with a batch posted from cookie `first` on.
  std::set<room_key> rooms_posted_since(uint64_t first) const;

  /// Ids of the jobs of `rooms`, oldest first.
  std::vector<uint64_t> jobs_of(const std::set<room_key>& rooms) const;

  /// Drops the KV counts of `rooms` (no job is left to wait for them).
  void forget_kv(const std::set<room_key>& rooms);

  /// Every job, by id.
  std::map<uint64_t, transfer_job>& jobs() { return jobs_; }
  const std::map<uint64_t, transfer_job>& jobs() const { return jobs_; }

  size_t batches() const { return batches_.size(); }
  size_t rooms_in_flight() const { return kv_in_flight_.size(); }

  /// No job, no batch, no KV in flight.
  bool empty() const { return jobs_.empty() && batches_.empty() && kv_in_flight_.empty(); }

 private:
  struct batch {
    uint64_t job = 0;
    bool aux = false;
  };
  using room_peer = std::pair<room_key, rank_ref>;

  /// One KV batch of `rp` less in flight; true when it was the last.
  bool kv_done(const room_peer& rp);

  uint64_t next_id_ = 1;
  std::map<uint64_t, transfer_job> jobs_;       // by job id
  std::map<uint64_t, batch> batches_;           // by cookie
  std::map<room_peer, uint32_t> kv_in_flight_;  // KV batches per room and peer
};

}  // namespace kvferry
