// The decode rank actor: one per TP rank of a decode instance. It registers
// with its instance's decider, finds each prefill instance through its
// bootstrap, checks the pairing of layouts at handshake, registers with the
// prefill ranks it receives from (tp_mapping's sources), owns the rooms of
// this rank, and reports each room's finish or failure to the decider, whose
// verdict it concludes with.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <caf/actor_clock.hpp>

#include "actors/base/guard.hpp"
#include "actors/base/sender_check.hpp"
#include "actors/common/deadline_book.hpp"
#include "actors/common/deadlines.hpp"
#include "actors/common/event_ring.hpp"
#include "actors/common/local_pool.hpp"
#include "actors/metrics/rank_figures.hpp"
#include "actors/plan/kv_digest.hpp"
#include "actors/rank/decode_room.hpp"
#include "actors/rank/fence_drains.hpp"
#include "actors/rank/incarnations.hpp"
#include "actors/rank/prefill_peer.hpp"
#include "actors/rank/silence_watch.hpp"
#include "messages/bootstrap.hpp"
#include "messages/decision.hpp"
#include "messages/handles.hpp"
#include "messages/staging.hpp"
#include "transport/transport.hpp"

namespace kvferry {

struct decode_rank_config {
  rank_ref self;
  uint32_t tp_size = 1;
  uint32_t pp_size = 1;
  local_pool pool;
  std::string data_endpoint;
  deadlines limits;
  /// The transport that receives into this rank's pool; owned by the actor
  /// from now on (its receiver stops when the actor terminates).
  std::shared_ptr<transport::transport> net;
  /// Where the decider of this rank's instance is.
  decider_locator decider;
  /// This rank's staging ring, offered to its prefill sources (not offered:
  /// no staging here).
  staging_offer staging;
  /// Held while the actor lives: the slots of its rooms watch it.
  std::shared_ptr<const void> alive;
  /// Where it publishes which prefill instances are down (may be null).
  std::shared_ptr<rank_board> board;
  /// Its figures for Prometheus (null: none kept).
  std::shared_ptr<metrics::rank_figures> figures;
  /// Its process's life token, told to the decider (messages/life.hpp).
  life_token_ref life;
  /// End-to-end KV checksums: every chunk's digests are checked against what
  /// landed before it counts (host pools only).
  kv_checksum checksum = kv_checksum::off;
};

struct decode_rank_state {
  static inline const char* name = "kvferry.decode_rank";

  decode_rank_config cfg;
  std::map<uint64_t, decode_room> rooms;
  event_ring events;  // recent room events, for kvferry-ctl trace
  /// Finished rooms waiting for their verdict: when their finish was last
  /// sent (decider pings remind the decider of them).
  std::map<uint64_t, caf::actor_clock::time_point> finish_told;
  /// Concluded rooms whose pages wait for their fence to be quiet.
  fence_drains draining;
  bool quiesce_armed = false;
  std::map<std::string, prefill_peer> peers;  // by bootstrap_locator::key()
  /// The newest generation seen of each prefill instance.
  incarnations incarnations_seen;
  decider_actor decider;
  bool registered = false;
  /// The decider, watched while a keyed room is live here.
  silence_watch<caf::actor_addr, caf::actor_clock::time_point, rank_ref> deciders_heard;
  /// Senders of dropped messages, logged once each (actors/base/sender_check.hpp).
  stranger_log<caf::actor_addr> strangers;
  bool tick_armed = false;
  caf::actor_clock::time_point tick_due{};  // when the armed check should run
  /// The deadlines of the live rooms, behind one timer (deadline_atom).
  deadline_book<caf::actor_clock::time_point> room_deadlines;
  /// Run first inside the guard of every handler (actors/base/guard.hpp).
  handler_hook before_handler;
};

decode_rank_actor::behavior_type decode_rank(
    decode_rank_actor::stateful_pointer<decode_rank_state> self, decode_rank_config cfg);

}  // namespace kvferry
