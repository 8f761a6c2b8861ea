// The prefill side of one room, for a scheduler that is not an actor. Every
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

class sender {
 public:
  /// Made by runtime::make_sender.
  sender(prefill_rank_actor rank, uint64_t room, room_slot_ptr slot);
  sender(sender&&) noexcept = default;
  sender& operator=(sender&&) noexcept;
  sender(const sender&) = delete;
  sender& operator=(const sender&) = delete;

  /// Clears the room (see clear()).
  ~sender();

  uint64_t room() const { return room_; }

  /// The room has `num_pages` pages; its aux row is `aux_slot` (required when
  /// the pool has aux buffers). May be called before the decode side is known.
  void init(uint32_t num_pages, std::optional<uint32_t> aux_slot = std::nullopt);

  /// The next computed pages (chunked prefill), in room order; `last` on the
  /// chunk that completes the room. Chunks sent before the destination is
  /// known wait inside the rank.
  void send(std::vector<uint32_t> pages, bool last);

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
  prefill_rank_actor rank_;
  uint64_t room_;
  room_slot_ptr slot_;
  bool cleared_ = false;
};

}  // namespace kvferry
