// The transfer actor of a prefill rank: owns the rank's transport, turns each
// chunk job into one coalesced batch (all layers, runs of consecutive pages
// merged) and reports the outcome to the rank. A failed write, a bad plan or
// an exception fails that chunk's room only; the actor carries on.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "actors/rank/local_pool.hpp"
#include "messages/handles.hpp"
#include "messages/transfer.hpp"
#include "transport/transport.hpp"

namespace kvferry {

struct transfer_state {
  static inline const char* name = "kvferry.transfer";

  /// One posted job: a chunk to one destination rank.
  struct job {
    chunk_job meta;
    prefill_rank_actor reply_to;
    uint64_t bytes = 0;
    uint32_t writes = 0;
    uint32_t pending = 0;      // batches posted and not completed
    bool aux_waiting = false;  // aux batch deferred until the room's KV has landed
    failure why;
  };

  rank_ref self;
  local_pool pool;
  std::shared_ptr<transport::transport> net;
  transport::caps caps;
  struct peer {
    transport::peer_id id;
    kv_layout layout;
  };
  std::map<rank_ref, peer> peers;
  std::map<rank_ref, std::string> unreachable;            // peers whose connect() failed, and why
  std::map<uint64_t, job> jobs;                           // by job id
  std::map<uint64_t, std::pair<uint64_t, bool>> batches;  // cookie → (job id, is aux)
  std::map<std::pair<room_key, rank_ref>, uint32_t> kv_in_flight;  // KV batches per room and peer
  uint64_t next_id = 1;
};

/// Spawns with the prefill rank it serves, that rank's pool, and the transport
/// (which the actor then owns; it is destroyed when the actor terminates).
transfer_actor::behavior_type transfer(transfer_actor::stateful_pointer<transfer_state> self,
                                       rank_ref rank, local_pool pool,
                                       std::shared_ptr<transport::transport> net);

}  // namespace kvferry
