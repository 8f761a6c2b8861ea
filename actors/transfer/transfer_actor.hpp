// The transfer actor of a prefill rank: owns the rank's transport, turns each
// chunk job into one coalesced batch (all layers, runs of consecutive pages
// merged) and reports the outcome to the rank. A failed write, a bad plan or
// an exception fails that chunk's room only; the actor carries on.
//
// Staged chunks (a peer that offered its staging ring, messages/staging.hpp)
// ask the peer's staging actor for ring space, wait for its watermark to free
// the slot, gather the rank's head slice of every layer into the gather
// buffer and go as one bulk write. A staged chunk that must wait holds back
// only the later chunks of its own room; other rooms and peers go past it.
//
// Its logic is in plain classes, tested without CAF: job_book (jobs, batches,
// KV in flight), staged_queue and staged_pass (which staged job may go),
// gather_space, throw_scope (what a throw in a handler fails). Its steps are
// split by role over transfer_actor.cpp (behaviour, direct path),
// transfer_staged.cpp and transfer_shield.cpp (transfer_steps.hpp).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "actors/common/local_pool.hpp"
#include "actors/metrics/transfer_figures.hpp"
#include "actors/plan/kv_digest.hpp"
#include "actors/transfer/gather_space.hpp"
#include "actors/transfer/job_book.hpp"
#include "actors/transfer/staged_queue.hpp"
#include "messages/handles.hpp"
#include "messages/staging.hpp"
#include "messages/transfer.hpp"
#include "transport/transport.hpp"

namespace kvferry {

/// What a transfer actor did, published on purpose (read from any thread,
/// e.g. by a bench once its rooms concluded).
struct transfer_counters {
  std::atomic<uint64_t> writes{0};  ///< transport writes posted, after coalescing
  std::atomic<uint64_t> chunks{0};  ///< chunk jobs finished
  std::atomic<uint64_t> staged{0};  ///< ... of which went through a staging ring
};

/// A prefill rank's staging side: the gather buffer (registered with the
/// rank's transport) where staged chunks are gathered before their bulk
/// write. Without one, every chunk takes the sliced path.
struct transfer_staging {
  std::byte* gather = nullptr;
  uint64_t size = 0;
  transport::region_id region = 0;
  /// How long a staged chunk may wait for its ring slot (the grant and the
  /// watermark) before its room fails.
  std::chrono::milliseconds slot_wait{10000};
};

/// The transfer actor's state: the rank's transport and peers, and the plain
/// classes that hold its logic.
struct transfer_state {
  static inline const char* name = "kvferry.transfer";

  /// A decode rank the data plane is connected to.
  struct peer {
    transport::peer_id id;
    kv_layout layout;
    staging_offer staging;                    // offered and taken: its chunks are staged
    uint64_t consumed = 0;                    // its ring's watermark, as last heard
    kv_checksum checksum = kv_checksum::off;  // the digests it checks
  };

  rank_ref self;
  local_pool pool;
  std::shared_ptr<transport::transport> net;
  transport::caps caps;
  std::map<rank_ref, peer> peers;
  std::map<rank_ref, std::string> unreachable;      // peers whose connect() failed, and why
  job_book book;                                    // jobs, batches, KV in flight
  std::map<uint64_t, prefill_rank_actor> reply_to;  // by job id: who gets its chunk_result
  staged_queue queue;                               // staged jobs waiting for their peer's ring
  transfer_staging staging;
  gather_space gathered;
  std::shared_ptr<transfer_counters> counters;
  std::shared_ptr<metrics::transfer_figures> figures;  // for Prometheus; null: none kept
  /// What the handler running now handles: what a throw in it fails
  /// (transfer_shield.cpp). Every handler notes it first. (No
  /// before_handler hook here: tests make this actor throw through the
  /// transport it calls, tests/support/faulty_transport.hpp.)
  struct handling {
    const char* what = "";
    std::optional<uint64_t> job;  ///< the job it works on, if one
    uint64_t first_cookie = 0;    ///< the first batch it may post
  } now;
};

/// Spawns with the prefill rank it serves, that rank's pool, and the transport
/// (which the actor then owns; it is destroyed when the actor terminates).
/// With `metrics`, it keeps its figures there (actors/metrics/transfer_figures.hpp).
transfer_actor::behavior_type transfer(transfer_actor::stateful_pointer<transfer_state> self,
                                       rank_ref rank, local_pool pool,
                                       std::shared_ptr<transport::transport> net,
                                       transfer_staging staging,
                                       std::shared_ptr<transfer_counters> counters,
                                       std::shared_ptr<metrics::registry> metrics);

}  // namespace kvferry
