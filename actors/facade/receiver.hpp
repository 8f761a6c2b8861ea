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
  ///
  /// Prefix reuse (SGLang's decode_prefix_len): this rank already holds the
  /// room's first `prefix_tokens` tokens. `dst_pages` then starts at the page
  /// that holds token `prefix_tokens`; of that page only the tokens from
  /// `prefix_tokens % page_size` on are written, the rest of it is left as
  /// it is. The prefill side reads the value (sender::decode_prefix_tokens)
  /// and sends its pages from the same token on.
  void init(std::vector<uint32_t> dst_pages, std::optional<uint32_t> aux_slot = std::nullopt,
            std::vector<std::vector<uint32_t>> states = {}, uint32_t prefix_tokens = 0);
};

}  // namespace kvferry
