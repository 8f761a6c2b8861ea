// The one piece of state a rank actor shares with the scheduler's threads: the
// published KVPoll of a room. The actor writes it on every transition; the
// scheduler's poll() reads it with one atomic load, never a round trip. A
// slot also watches its rank actor: if the actor is gone (killed, shut down)
// before the room concluded, the slot reads Failed with that cause, so that
// no scheduler polls a dead rank's room forever.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>

#include <caf/allowed_unsafe_message_type.hpp>

#include "messages/failure.hpp"
#include "messages/kv_poll.hpp"

namespace kvferry {

/// The published state of one room on one rank.
///
/// Writers: only the rank actor that owns the room. Readers: any thread.
/// The state only moves up (Bootstrapping → ... → Success) or into Failed,
/// which is final; the error is stored before the state turns Failed.
class room_slot {
 public:
  room_slot() = default;
  /// The slot of room `room` on rank `owner`, whose actor holds the
  /// `owner_alive` token for as long as it lives.
  room_slot(uint64_t room, rank_ref owner, std::weak_ptr<const void> owner_alive)
      : room_(room),
        owner_(std::move(owner)),
        owner_alive_(std::move(owner_alive)),
        watched_(true) {}
  room_slot(const room_slot&) = delete;
  room_slot& operator=(const room_slot&) = delete;

  /// The current state (acquire load); Failed once the rank actor is gone
  /// before the room concluded.
  kv_poll state() const noexcept {
    auto s = published();
    return !is_terminal(s) && orphaned() ? kv_poll::failed : s;
  }

  /// The room's error once it is Failed; nullopt before.
  std::optional<transfer_error> error() const;

  /// True when the slot's rank actor is gone.
  bool orphaned() const noexcept { return watched_ && owner_alive_.expired(); }

  /// True once the room's pages may be reused: it concluded and no write
  /// into them (decode) or out of them (prefill) can still happen.
  bool released() const noexcept { return released_.load(std::memory_order_acquire); }

  // -- rank actor side --------------------------------------------------------

  /// Moves the state up to `to` (not into Failed). Returns false when `to` is
  /// not above the current state or the state is terminal.
  bool advance(kv_poll to);

  /// Concludes Failed with `why`. The first conclusion wins; returns false if
  /// the slot was already terminal.
  bool fail(const room_key& room, failure why);

  /// Marks the room's pages reusable (after it concluded).
  void release() noexcept { released_.store(true, std::memory_order_release); }

 private:
  kv_poll published() const noexcept {
    return static_cast<kv_poll>(state_.load(std::memory_order_acquire));
  }

  uint64_t room_ = 0;
  rank_ref owner_;
  std::weak_ptr<const void> owner_alive_;
  bool watched_ = false;
  std::atomic<uint8_t> state_{static_cast<uint8_t>(kv_poll::bootstrapping)};
  std::atomic<bool> released_{false};
  mutable std::mutex mu_;  // guards error_
  std::optional<transfer_error> error_;
};

/// Shared by the scheduler's sender/receiver object and the rank actor.
using room_slot_ptr = std::shared_ptr<room_slot>;

}  // namespace kvferry

// Travels only inside one process (scheduler → its rank actor).
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvferry::room_slot_ptr)
