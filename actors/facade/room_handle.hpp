// What a scheduler's sender and receiver share: the room's id, the rank actor
// that owns it, the slot it publishes, and the calls that mean the same on
// both sides. Every call is a message to the rank (never blocking) except
// poll() and failure(), which read the published slot.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>

#include <caf/send.hpp>

#include "messages/failure.hpp"
#include "messages/handles.hpp"
#include "messages/kv_poll.hpp"
#include "messages/poll_snapshot.hpp"

namespace kvferry {

template <class RankActor>
class room_handle {
 public:
  room_handle(RankActor rank, uint64_t room, room_slot_ptr slot)
      : rank_(std::move(rank)), room_(room), slot_(std::move(slot)) {}

  room_handle(room_handle&& other) noexcept
      : rank_(std::move(other.rank_)),
        room_(other.room_),
        slot_(std::move(other.slot_)),
        cleared_(std::exchange(other.cleared_, true)) {}

  room_handle& operator=(room_handle&& other) noexcept {
    if (this != &other) {
      clear();
      rank_ = std::move(other.rank_);
      room_ = other.room_;
      slot_ = std::move(other.slot_);
      cleared_ = std::exchange(other.cleared_, true);
    }
    return *this;
  }

  room_handle(const room_handle&) = delete;
  room_handle& operator=(const room_handle&) = delete;

  /// Clears the room (see clear()).
  ~room_handle() { clear(); }

  uint64_t room() const { return room_; }

  /// The room's state; one atomic load.
  kv_poll poll() const { return slot_->state(); }

  /// The room's error once poll() is Failed: room, cause and origin rank.
  std::optional<transfer_error> failure() const { return slot_->error(); }

  /// When the rank concluded the room (ns since the Unix epoch); 0 before.
  int64_t concluded_at_ns() const { return slot_->concluded_at_ns(); }

  /// True once the room's pages may be reused: it concluded, and no write
  /// into them (receiver) or out of them (sender) can still happen, even
  /// from a peer that failed half way. Free the pages only then.
  bool released() const { return slot_->released(); }

  /// Fails the room on every participating rank (cause: aborted).
  void abort() { caf::send_as(rank_, rank_, room_abort_atom_v, room_); }

  /// Releases the room on the rank; a room that has not concluded is failed
  /// first. Safe to call twice.
  void clear() {
    if (cleared_ || !rank_)
      return;
    cleared_ = true;
    caf::send_as(rank_, rank_, room_clear_atom_v, room_);
  }

 protected:
  RankActor rank_;
  uint64_t room_;
  room_slot_ptr slot_;
  bool cleared_ = false;
};

}  // namespace kvferry
