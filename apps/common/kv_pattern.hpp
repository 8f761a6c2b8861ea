// Deterministic KV content: the bytes of (room, page of the room, buffer) are
// a function of those three and a seed, so a decode process can check what a
// prefill process wrote without seeing it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvferry::apps {

/// Fills `len` bytes (a multiple of 8) with the pattern of (room, page, buffer).
void fill_pattern(std::byte* dst, uint64_t len, uint64_t seed, uint64_t room, uint32_t page,
                  uint32_t buffer);

/// True if `len` bytes at `src` hold the pattern of (room, page, buffer).
bool check_pattern(const std::byte* src, uint64_t len, uint64_t seed, uint64_t room, uint32_t page,
                   uint32_t buffer);

/// The aux payload a prefill writes after the room stamp (bytes 16.. of the
/// row), and its check on decode.
void fill_aux(std::byte* row, uint32_t row_bytes, uint64_t seed, uint64_t room);
bool check_aux(const std::byte* row, uint32_t row_bytes, uint64_t seed, uint64_t room);

}  // namespace kvferry::apps
