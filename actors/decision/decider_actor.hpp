// The decider of a decode instance: for every room, it knows who takes part
// (every decode rank of the instance, every prefill rank of the instance the
// room comes from), collects their finishes and the first failure anyone
// reports, and sends the one verdict to all of them. It draws each room's
// generation. Decode ranks register with it at start; it monitors them, and a
// rank that goes down fails the rooms it had joined.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "actors/decision/decision_book.hpp"
#include "messages/handles.hpp"

namespace kvferry {

struct decider_state {
  static inline const char* name = "kvferry.decider";

  decision_book book{"", 0, 1, 1, 1};
  std::map<std::pair<uint32_t, uint32_t>, decode_rank_actor> members;  // by (tp, pp)
  std::map<rank_ref, prefill_rank_actor> prefill;                      // participants' handles
};

/// Spawns the decider of decode instance `instance` of tp_size x pp_size
/// ranks; `generation` names this incarnation of the instance.
decider_actor::behavior_type decider(decider_actor::stateful_pointer<decider_state> self,
                                     std::string instance, uint32_t tp_size, uint32_t pp_size,
                                     uint64_t generation);

}  // namespace kvferry
