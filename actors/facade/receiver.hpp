// The decode side of one room, for a scheduler that is not an actor. Every
// call is a message to the rank actor (never blocking) except poll() and
// failure(), which read the state the actor publishes.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "messages/failure.hpp"
#include "messages/handles.hpp"
#include "messages/kv_poll.hpp"
#include "messages/poll_snapshot.hpp"

namespace kvferry {

class receiver {
 public:
  /// Made by runtime::make_receiver.
  receiver(decode_rank_actor rank, uint64_t room, room_slot_ptr slot);
  receiver(receiver&&) noexcept = default;
  receiver& operator=(receiver&&) noexcept;
  receiver(const receiver&) = delete;
  receiver& operator=(const receiver&) = delete;

  /// Clears the room (see clear()).
  ~receiver();

  uint64_t room() const { return room_; }

  /// The room's destination pages (one per prefill page, in order, distinct)
  /// and aux row (required when the pool has aux buffers). Call once the
  /// pages are reserved; may be called before the handshake completes.
  void init(std::vector<uint32_t> dst_pages, std::optional<uint32_t> aux_slot = std::nullopt);

  /// The room's state; one atomic load.
  kv_poll poll() const { return slot_->state(); }

  /// Fails the room on every participating rank (cause: aborted).
  void abort();

  /// The room's error once poll() is Failed: room, cause and origin rank.
  std::optional<transfer_error> failure() const { return slot_->error(); }

  /// Releases the room on the rank; a room that has not concluded is failed
  /// first. Safe to call twice.
  void clear();

 private:
  decode_rank_actor rank_;
  uint64_t room_;
  room_slot_ptr slot_;
  bool cleared_ = false;
};

}  // namespace kvferry
