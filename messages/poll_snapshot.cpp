#include "messages/poll_snapshot.hpp"

#include "messages/wall_clock.hpp"

namespace kvferry {

std::optional<transfer_error> room_slot::error() const {
  std::lock_guard<std::mutex> guard{mu_};
  if (error_ || is_terminal(published()) || !orphaned())
    return error_;
  return transfer_error{
      room_key{room_, 0},
      failure{errc::shut_down,
              "the rank actor of " + to_string(owner_) + " terminated before room " +
                  std::to_string(room_) + " concluded (it was " + to_string(published()) + ")",
              owner_}};
}

bool room_slot::advance(kv_poll to) {
  if (to == kv_poll::failed)
    return false;
  auto cur = state_.load(std::memory_order_acquire);
  auto want = static_cast<uint8_t>(to);
  if (is_terminal(to) && !is_terminal(static_cast<kv_poll>(cur)))
    concluded_at_.store(wall_ns(), std::memory_order_release);  // one writer: the rank actor
  for (;;) {
    if (is_terminal(static_cast<kv_poll>(cur)) || cur >= want)
      return false;
    if (state_.compare_exchange_weak(cur, want, std::memory_order_acq_rel))
      return true;
  }
}

bool room_slot::fail(const room_key& room, failure why) {
  std::lock_guard<std::mutex> guard{mu_};
  auto cur = published();
  if (is_terminal(cur))
    return false;
  error_ = transfer_error{room, std::move(why)};
  concluded_at_.store(wall_ns(), std::memory_order_release);
  state_.store(static_cast<uint8_t>(kv_poll::failed), std::memory_order_release);
  return true;
}

}  // namespace kvferry
