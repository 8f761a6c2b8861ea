#include "actors/decision/group_decision.hpp"

namespace kvferry {

void group_decision::add_participant(const rank_ref& participant) {
  if (!decided_)
    participants_.insert(participant);
}

std::optional<verdict> group_decision::finish(const rank_ref& participant) {
  if (decided_ || participants_.count(participant) == 0)
    return std::nullopt;
  finished_.insert(participant);
  if (finished_.size() < participants_.size())
    return std::nullopt;
  decided_ = verdict{kv_poll::success, {}};
  return decided_;
}

std::optional<verdict> group_decision::fail(failure why) {
  if (decided_)
    return std::nullopt;
  decided_ = verdict{kv_poll::failed, std::move(why)};
  return decided_;
}

}  // namespace kvferry
