// The decode rank actor: one per TP rank of a decode instance. It finds each
// prefill instance through its bootstrap, checks the layouts at handshake,
// registers with the prefill ranks it receives from, owns the rooms of this
// rank, and is their decider: it concludes each room from its sources'
// finishes and the aux stamp, or from the first failure, and sends the verdict
// to every participating prefill rank.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "actors/rank/deadlines.hpp"
#include "actors/rank/decode_room.hpp"
#include "actors/rank/local_pool.hpp"
#include "messages/bootstrap.hpp"
#include "messages/handles.hpp"
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
  /// First room generation; distinct per incarnation of the rank.
  uint64_t first_generation = 1;
};

struct decode_rank_state {
  static inline const char* name = "kvferry.decode_rank";

  /// One prefill instance as seen from this rank.
  struct prefill_peer {
    enum class stage { resolving, ready, refused };
    stage phase = stage::resolving;
    bootstrap_locator where;
    std::vector<rank_ref> sources;  // the ranks this rank receives from
    std::map<rank_ref, prefill_rank_actor> handles;
    std::set<rank_ref> accepted;
    failure refusal;
    std::string last_error;
    uint32_t attempts = 0;
    bool in_flight = false;  // a resolve is running
  };

  decode_rank_config cfg;
  std::map<uint64_t, decode_room> rooms;
  std::map<std::string, prefill_peer> peers;  // by bootstrap_locator::key()
  uint64_t next_generation = 1;
};

decode_rank_actor::behavior_type decode_rank(
    decode_rank_actor::stateful_pointer<decode_rank_state> self, decode_rank_config cfg);

}  // namespace kvferry
