// Deterministic KV content: every head of every token of every page of a
// room has bytes that are a function of (seed, room, page of the room, layer,
// K or V, token, head), so a decode rank can check the slice it holds against
// what any prefill rank wrote, whatever the TP split on either side.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvferry::apps {

/// Where one rank's KV page sits in the model: which heads its token rows hold.
struct page_shape {
  uint32_t page_size = 1;   ///< tokens per page
  uint32_t first_head = 0;  ///< first model head of the rank (MLA: 0)
  uint32_t heads = 1;       ///< heads per token row
  uint32_t head_bytes = 8;  ///< bytes per head (a multiple of 8)
};

/// Fills one page of one KV buffer (layer, K or V) of a rank.
void fill_page(std::byte* page, const page_shape& shape, uint64_t seed, uint64_t room,
               uint32_t page_index, uint32_t layer, bool value);

/// True if one page holds the pattern of (room, page_index, layer, K/V) for
/// the rank's heads.
bool check_page(const std::byte* page, const page_shape& shape, uint64_t seed, uint64_t room,
                uint32_t page_index, uint32_t layer, bool value);

/// True if tokens [first_token, end_token) of one page hold that pattern
/// (check_page for part of a page: prefix reuse leaves the others alone).
bool check_tokens(const std::byte* page, const page_shape& shape, uint64_t seed, uint64_t room,
                  uint32_t page_index, uint32_t layer, bool value, uint32_t first_token,
                  uint32_t end_token);

/// The aux payload a prefill writes after the room stamp (bytes 16.. of the
/// row), and its check on decode.
void fill_aux(std::byte* row, uint32_t row_bytes, uint64_t seed, uint64_t room);
bool check_aux(const std::byte* row, uint32_t row_bytes, uint64_t seed, uint64_t room);

/// A state item (slot or state page) of component `component`, buffer `buffer`.
void fill_state(std::byte* item, uint64_t len, uint64_t seed, uint64_t room, uint32_t component,
                uint32_t buffer, uint32_t index);
bool check_state(const std::byte* item, uint64_t len, uint64_t seed, uint64_t room,
                 uint32_t component, uint32_t buffer, uint32_t index);

}  // namespace kvferry::apps
