// DP attention, plain logic: an instance of `tp` ranks in `dp` groups, each an
// attention-TP group of tp / dp ranks with its own KV pool (the rest of the
// instance, the MoE experts, does not concern kvferry). A room is bound to one
// prefill group and one decode group, and only their ranks hear of it: each
// group is an instance of its own to the runtime ("prefill-0/dp2"), with its
// own bootstrap and decider. Which prefill group a room goes to is resolved
// as SGLang does (sglang-pd-protocol.md section 3.1).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace kvferry {

struct dp_shape {
  uint32_t tp = 1;  ///< ranks of the whole instance
  uint32_t dp = 1;  ///< DP groups
  /// Ranks of one group (its attention TP).
  uint32_t attn_tp() const { return dp == 0 ? 0 : tp / dp; }
};

/// Why `s` cannot be split into groups ("prefill tp = 4, dp = 3: expected a
/// dp that divides tp"), or nullopt. `side` names the instance in the text.
std::optional<std::string> validate(const dp_shape& s, const std::string& side);

/// Why a prefill instance of shape `prefill` (PP `prefill_pp`) and a decode
/// instance of shape `decode` cannot pair group to group (a split that does
/// not divide, or attention TPs that do not map: tp_mapping.hpp), naming both
/// shapes, or nullopt.
std::optional<std::string> check_dp_pair(dp_shape prefill, uint32_t prefill_pp, dp_shape decode,
                                         uint32_t decode_pp);

/// The name of group `group` of `instance`: the instance itself when it has
/// one group, else "<instance>/dp<group>".
std::string dp_group_instance(const std::string& instance, uint32_t group, uint32_t dp);

/// How a room's prefill group was chosen, in SGLang's order.
enum class dp_choice_kind {
  given,          ///< prefill_dp_rank, from the scheduler or the router
  single,         ///< dp_size == 1
  room_modulo,    ///< bootstrap_room % dp_size (follow_bootstrap_room)
  ask_bootstrap,  ///< none of those: the bootstrap must be asked
};

struct dp_choice {
  dp_choice_kind kind = dp_choice_kind::single;
  uint32_t group = 0;  ///< meaningful unless kind is ask_bootstrap
  std::string error;   ///< a given group out of range: the value and the range
  bool ok() const { return error.empty(); }
};

/// The prefill group of `room` for a prefill instance of `dp` groups:
/// `given` first (checked against dp), then dp == 1, then room % dp when
/// `follow_bootstrap_room`, else ask_bootstrap.
dp_choice prefill_dp_group(uint64_t room, uint32_t dp, std::optional<int64_t> given,
                           bool follow_bootstrap_room = true);

const char* to_string(dp_choice_kind k);

}  // namespace kvferry
