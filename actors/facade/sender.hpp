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
};

}  // namespace kvferry
