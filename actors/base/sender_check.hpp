// Messages only from whom they may come. A rank drops a message from the
// wrong sender (a verdict not from its room's decider, a scheduler-only
// message from another process, a request from a decode rank that never
// registered) and logs it once per sender: a stranger that floods costs one
// line, not one per message. stranger_log is plain logic; the checks below
// it take the actor.
#pragma once

#include <cstddef>
#include <set>
#include <string>
#include <string_view>

#include <caf/actor_addr.hpp>
#include <caf/actor_cast.hpp>
#include <caf/node_id.hpp>

#include "actors/base/log.hpp"

namespace kvferry {

/// Remembers which senders were already logged for a dropped message.
template <class Address>
class stranger_log {
 public:
  /// Senders remembered at most; once full, one last line says so and the
  /// rest are dropped silently.
  static constexpr size_t max_remembered = 256;

  /// True when a drop from `who` should be logged now.
  bool first_from(const Address& who) {
    if (seen_.count(who) != 0)
      return false;
    if (seen_.size() >= max_remembered) {
      bool tell = !full_told_;
      full_told_ = true;
      return tell;
    }
    seen_.insert(who);
    return true;
  }

  size_t dropped() const { return dropped_; }
  void count() { ++dropped_; }

 private:
  std::set<Address> seen_;
  bool full_told_ = false;
  size_t dropped_ = 0;
};

/// Drops the message `what` being handled by `self` (whose state has a
/// stranger_log<caf::actor_addr> `strangers`); `label` names `self` in logs.
template <class Self>
void drop_stranger(Self* self, const std::string& label, std::string_view what) {
  auto& log_of = self->state.strangers;
  log_of.count();
  auto from = caf::actor_cast<caf::actor_addr>(self->current_sender());
  if (log_of.first_from(from))
    log().warn(
        "{} dropped {} from {}: not a sender it may come from (said once per sender; "
        "{} dropped so far)",
        label, what, from ? caf::to_string(from.node()) : std::string{"an anonymous sender"},
        log_of.dropped());
}

/// True when the message being handled comes from this process (the
/// scheduler's facade sends as the rank itself): scheduler-only messages
/// from anywhere else, or from no one, are dropped.
template <class Self>
bool from_this_process(Self* self, const std::string& label, std::string_view what) {
  auto s = self->current_sender();
  if (s && s->node() == self->node())
    return true;
  drop_stranger(self, label, what);
  return false;
}

/// True when the message being handled comes from `expected`.
template <class Self>
bool from(Self* self, const caf::actor_addr& expected, const std::string& label,
          std::string_view what) {
  if (expected && caf::actor_cast<caf::actor_addr>(self->current_sender()) == expected)
    return true;
  drop_stranger(self, label, what);
  return false;
}

}  // namespace kvferry
