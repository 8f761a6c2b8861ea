// The decode side of one room, for a scheduler that is not an actor.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "actors/facade/room_handle.hpp"

namespace kvferry {

class receiver : public room_handle<decode_rank_actor> {
 public:
  /// Made by runtime::make_receiver.
  using room_handle::room_handle;

  /// The room's destination pages (one per prefill page, in order, distinct),
  /// aux row (required when the pool has aux buffers) and state indices (one
  /// list per state component of the pool). Call once the pages are
  /// reserved; may be called before the handshake completes.
  void init(std::vector<uint32_t> dst_pages, std::optional<uint32_t> aux_slot = std::nullopt,
            std::vector<std::vector<uint32_t>> states = {});
};

}  // namespace kvferry
