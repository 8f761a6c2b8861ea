// The one piece of state a rank actor shares with the scheduler's threads: the
// published KVPoll of a room. The actor writes it on every transition; the
// scheduler's poll() reads it with one atomic load, never a round trip. A
// slot also watches its rank actor: if the actor is gone (killed, shut down)
// before the room concluded, the slot reads Failed with that cause, so that
// no scheduler polls a dead rank's room forever.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

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

  /// When the rank concluded the room (ns since the Unix epoch, written
  /// before the terminal state is published); 0 before, or when the slot
  /// reads Failed only because its rank actor is gone.
  int64_t concluded_at_ns() const noexcept {
    return is_terminal(published()) ? concluded_at_.load(std::memory_order_acquire) : 0;
  }

  /// True once the room's pages may be reused: it concluded and no write
  /// into them (decode) or out of them (prefill) can still happen.
  bool released() const noexcept { return released_.load(std::memory_order_acquire); }

  /// Prefill: the tokens the decode side already holds (prefix reuse), read
  /// once the state is WaitingForInput or above (written before it).
  uint32_t prefix_tokens() const noexcept { return prefix_tokens_.load(std::memory_order_acquire); }

  // -- rank actor side --------------------------------------------------------

  /// Moves the state up to `to` (not into Failed). Returns false when `to` is
  /// not above the current state or the state is terminal.
  bool advance(kv_poll to);

  /// Concludes Failed with `why`. The first conclusion wins; returns false if
  /// the slot was already terminal.
  bool fail(const room_key& room, failure why);

  /// Marks the room's pages reusable (after it concluded).
  void release() noexcept { released_.store(true, std::memory_order_release); }

  /// Publishes the decode side's prefix (before the state moves past
  /// Bootstrapping).
  void set_prefix_tokens(uint32_t n) noexcept {
    prefix_tokens_.store(n, std::memory_order_release);
  }

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
  std::atomic<int64_t> concluded_at_{0};
  std::atomic<uint32_t> prefix_tokens_{0};
  mutable std::mutex mu_;  // guards error_
  std::optional<transfer_error> error_;
};

/// Shared by the scheduler's sender/receiver object and the rank actor.
using room_slot_ptr = std::shared_ptr<room_slot>;

/// What a rank actor publishes beyond its rooms' slots, on purpose, for its
/// scheduler (a router) to read without a round trip: the prefill instances
/// a decode rank knows down (by bootstrap key, with the cause new rooms fail
/// with), and on a prefill rank its own instance's death and the rooms decode
/// ranks asked for that its scheduler has not opened (a router may have sent
/// them here). Written by the actor only; read from any thread.
class rank_board {
 public:
  void set_down(const std::string& key, failure why) {
    std::lock_guard<std::mutex> g{mu_};
    down_.insert_or_assign(key, std::move(why));
  }
  void set_up(const std::string& key) {
    std::lock_guard<std::mutex> g{mu_};
    down_.erase(key);
  }
  std::optional<failure> down(const std::string& key) const {
    std::lock_guard<std::mutex> g{mu_};
    auto i = down_.find(key);
    if (i == down_.end())
      return std::nullopt;
    return i->second;
  }
  void add_requested(uint64_t room) {
    std::lock_guard<std::mutex> g{mu_};
    requested_.insert(room);
  }
  void remove_requested(uint64_t room) {
    std::lock_guard<std::mutex> g{mu_};
    requested_.erase(room);
  }
  std::vector<uint64_t> requested() const {
    std::lock_guard<std::mutex> g{mu_};
    return {requested_.begin(), requested_.end()};
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, failure> down_;
  std::set<uint64_t> requested_;  // bounded by the prefill rank's pending requests
};

/// The key a prefill rank uses on its board for its own instance.
inline const std::string own_instance_key = "self";

}  // namespace kvferry

// Travels only inside one process (scheduler → its rank actor).
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvferry::room_slot_ptr)
