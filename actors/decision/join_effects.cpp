#include "actors/decision/join_effects.hpp"

namespace kvferry {

join_effects judge_join(const join_facts& f) {
  if (f.decided)
    return {};
  if (f.new_room && f.at_admission_limit)
    return {join_failure::overloaded, false};
  if (f.member_missing)
    return {join_failure::member_missing, true};
  if (f.prefill_lost)
    return {join_failure::prefill_lost, true};
  if (f.reported_before)
    return {join_failure::reported_before, true};
  return {};
}

const char* to_string(join_failure f) {
  switch (f) {
    case join_failure::none:
      return "none";
    case join_failure::overloaded:
      return "overloaded";
    case join_failure::member_missing:
      return "member_missing";
    case join_failure::prefill_lost:
      return "prefill_lost";
    case join_failure::reported_before:
      return "reported_before";
  }
  return "?";
}

}  // namespace kvferry
