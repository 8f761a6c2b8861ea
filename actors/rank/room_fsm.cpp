#include "actors/rank/room_fsm.hpp"

#include <cstdio>

#include "actors/common/durations.hpp"

namespace kvferry {

room_fsm::room_fsm(const deadlines& limits) : limits_(limits) {
  arm(limits_.bootstrapping);
}

std::chrono::nanoseconds room_fsm::limit_of(kv_poll s) const {
  switch (s) {
    case kv_poll::bootstrapping:
      return limits_.bootstrapping;
    case kv_poll::waiting_for_input:
      return limits_.waiting_for_input;
    case kv_poll::transferring:
      return limits_.transferring;
    default:
      return std::chrono::nanoseconds{0};
  }
}

void room_fsm::arm(std::chrono::nanoseconds after) {
  ++epoch_;
  armed_for_ = after;
  timer_pending_ = true;
}

bool room_fsm::advance(kv_poll to) {
  if (terminal() || to == kv_poll::failed || to == kv_poll::success || to <= state_)
    return false;
  state_ = to;
  if (!awaiting_verdict_)
    arm(limit_of(to));
  return true;
}

void room_fsm::touch() {
  if (!terminal() && !awaiting_verdict_)
    arm(limit_of(state_));
}

bool room_fsm::succeed() {
  if (terminal())
    return false;
  state_ = kv_poll::success;
  timer_pending_ = false;
  return true;
}

bool room_fsm::fail(failure why) {
  if (terminal())
    return false;
  state_ = kv_poll::failed;
  why_ = std::move(why);
  timer_pending_ = false;
  return true;
}

void room_fsm::await_verdict() {
  await_verdict(limits_.verdict, false);
}

void room_fsm::await_verdict(std::chrono::nanoseconds after, bool finished) {
  if (terminal() || awaiting_verdict_)
    return;
  awaiting_verdict_ = true;
  finished_ = finished;
  arm(after);
}

uint32_t room_fsm::wait_longer() {
  if (!terminal() && awaiting_verdict_)
    arm(limits_.verdict);
  return ++extensions_;
}

std::optional<room_fsm::timer> room_fsm::take_timer() {
  if (!timer_pending_ || terminal())
    return std::nullopt;
  timer_pending_ = false;
  return timer{epoch_, armed_for_};
}

std::string room_fsm::stuck_cause(const room_key& key) const {
  if (awaiting_verdict_ && finished_)
    return to_string(key) + " finished here but got no verdict from its decider within " +
           format_duration(armed_for_);
  if (awaiting_verdict_)
    return to_string(key) + " got no verdict from its decider within " +
           format_duration(armed_for_) + " after reporting a failure in " + to_string(state_);
  return to_string(key) + " stayed in " + to_string(state_) + " past its " +
         format_duration(armed_for_) + " deadline";
}

std::optional<room_fsm::change> room_fsm::take_change() {
  if (counted_ == state_)
    return std::nullopt;
  change c{counted_, state_};
  counted_ = state_;
  return c;
}

}  // namespace kvferry
