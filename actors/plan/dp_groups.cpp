// DP groups: shapes, names and the room's prefill group (dp_groups.hpp).
#include "actors/plan/dp_groups.hpp"

#include "actors/plan/tp_mapping.hpp"

namespace kvferry {

std::optional<std::string> validate(const dp_shape& s, const std::string& side) {
  auto shape = side + " tp = " + std::to_string(s.tp) + ", dp = " + std::to_string(s.dp);
  if (s.tp == 0 || s.dp == 0)
    return shape + ": expected both at least 1";
  if (s.tp % s.dp != 0)
    return shape + ": expected a dp that divides tp (each DP group is tp / dp attention ranks)";
  return std::nullopt;
}

std::optional<std::string> check_dp_pair(dp_shape prefill, uint32_t prefill_pp, dp_shape decode,
                                         uint32_t decode_pp) {
  if (auto bad = validate(prefill, "prefill"))
    return bad;
  if (auto bad = validate(decode, "decode"))
    return bad;
  if (auto bad = check_sizes({prefill.attn_tp(), prefill_pp}, {decode.attn_tp(), decode_pp}))
    return "prefill tp = " + std::to_string(prefill.tp) + ", dp = " + std::to_string(prefill.dp) +
           " (groups of " + std::to_string(prefill.attn_tp()) +
           ") and decode tp = " + std::to_string(decode.tp) +
           ", dp = " + std::to_string(decode.dp) + " (groups of " +
           std::to_string(decode.attn_tp()) + ") cannot pair: " + *bad;
  return std::nullopt;
}

std::string dp_group_instance(const std::string& instance, uint32_t group, uint32_t dp) {
  return dp <= 1 ? instance : instance + "/dp" + std::to_string(group);
}

dp_choice prefill_dp_group(uint64_t room, uint32_t dp, std::optional<int64_t> given,
                           bool follow_bootstrap_room) {
  dp_choice out;
  if (given) {
    out.kind = dp_choice_kind::given;
    if (*given < 0 || dp == 0 || *given >= int64_t{dp}) {
      out.error = "prefill_dp_rank = " + std::to_string(*given) + " for room " +
                  std::to_string(room) + ", expected 0.." + std::to_string(dp == 0 ? 0 : dp - 1) +
                  " (the prefill instance has " + std::to_string(dp) + " DP groups)";
      return out;
    }
    out.group = static_cast<uint32_t>(*given);
    return out;
  }
  if (dp <= 1) {
    out.kind = dp_choice_kind::single;
    return out;
  }
  if (follow_bootstrap_room) {
    out.kind = dp_choice_kind::room_modulo;
    out.group = static_cast<uint32_t>(room % dp);
    return out;
  }
  out.kind = dp_choice_kind::ask_bootstrap;
  return out;
}

const char* to_string(dp_choice_kind k) {
  switch (k) {
    case dp_choice_kind::given:
      return "given";
    case dp_choice_kind::single:
      return "single";
    case dp_choice_kind::room_modulo:
      return "room_modulo";
    case dp_choice_kind::ask_bootstrap:
      return "ask_bootstrap";
  }
  return "?";
}

}  // namespace kvferry
