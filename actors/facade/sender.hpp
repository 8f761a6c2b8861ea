// The prefill side of one room, for a scheduler that is not an actor.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "actors/facade/room_handle.hpp"

namespace kvferry {

class sender : public room_handle<prefill_rank_actor> {
 public:
  /// Made by runtime::make_sender.
  using room_handle::room_handle;

  /// The room has `num_pages` pages; its aux row is `aux_slot` (required when
  /// the pool has aux buffers). May be called before the decode side is known.
  void init(uint32_t num_pages, std::optional<uint32_t> aux_slot = std::nullopt);

  /// The next computed pages (chunked prefill), in room order; `last` on the
  /// chunk that completes the room, with the state components' indices (one
  /// list per component of the pool). Chunks sent before the destination is
  /// known wait inside the rank.
  void send(std::vector<uint32_t> pages, bool last, std::vector<std::vector<uint32_t>> states = {});

  /// The tokens the decode side already holds (prefix reuse, receiver::init),
  /// once poll() is WaitingForInput or above; 0 before, and without reuse.
  /// The room's pages (init's num_pages, every chunk) start at the page that
  /// holds this token, as SGLang's pop_decode_prefix_len has it.
  uint32_t decode_prefix_tokens() const { return slot_->prefix_tokens(); }
};

}  // namespace kvferry
