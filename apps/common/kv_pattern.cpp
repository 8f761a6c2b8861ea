#include "apps/common/kv_pattern.hpp"

#include "messages/layout.hpp"

namespace kvferry::apps {

namespace {

inline uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// The seed of one unit of the pattern.
inline uint64_t unit_seed(uint64_t seed, uint64_t room, uint64_t a, uint64_t b) {
  return mix(mix(mix(seed) ^ room) ^ a) ^ b;
}

/// One LCG step per word: cheap enough to run at memory speed, different for
/// every unit and offset.
inline void fill_words(std::byte* dst, uint64_t len, uint64_t x) {
  auto* w = reinterpret_cast<uint64_t*>(dst);
  for (uint64_t i = 0; i < len / 8; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    w[i] = x ^ (x >> 29);
  }
}

inline bool check_words(const std::byte* src, uint64_t len, uint64_t x) {
  auto* w = reinterpret_cast<const uint64_t*>(src);
  uint64_t diff = 0;
  for (uint64_t i = 0; i < len / 8; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    diff |= w[i] ^ (x ^ (x >> 29));
  }
  return diff == 0;
}

inline uint64_t where(uint32_t layer, bool value, uint32_t token, uint32_t head) {
  return (uint64_t{layer} << 40) | (uint64_t{value} << 39) | (uint64_t{token} << 16) | head;
}

}  // namespace

void fill_page(std::byte* page, const page_shape& s, uint64_t seed, uint64_t room,
               uint32_t page_index, uint32_t layer, bool value) {
  auto row = uint64_t{s.heads} * s.head_bytes;
  for (uint32_t t = 0; t < s.page_size; ++t)
    for (uint32_t h = 0; h < s.heads; ++h)
      fill_words(page + t * row + uint64_t{h} * s.head_bytes, s.head_bytes,
                 unit_seed(seed, room, page_index, where(layer, value, t, s.first_head + h)));
}

bool check_page(const std::byte* page, const page_shape& s, uint64_t seed, uint64_t room,
                uint32_t page_index, uint32_t layer, bool value) {
  return check_tokens(page, s, seed, room, page_index, layer, value, 0, s.page_size);
}

bool check_tokens(const std::byte* page, const page_shape& s, uint64_t seed, uint64_t room,
                  uint32_t page_index, uint32_t layer, bool value, uint32_t first_token,
                  uint32_t end_token) {
  auto row = uint64_t{s.heads} * s.head_bytes;
  bool good = true;
  for (uint32_t t = first_token; t < end_token && t < s.page_size; ++t)
    for (uint32_t h = 0; h < s.heads; ++h)
      good &=
          check_words(page + t * row + uint64_t{h} * s.head_bytes, s.head_bytes,
                      unit_seed(seed, room, page_index, where(layer, value, t, s.first_head + h)));
  return good;
}

void fill_aux(std::byte* row, uint32_t row_bytes, uint64_t seed, uint64_t room) {
  if (row_bytes > room_stamp_bytes)
    fill_words(row + room_stamp_bytes, (row_bytes - room_stamp_bytes) & ~7u,
               unit_seed(seed, room, UINT64_MAX, 0));
}

bool check_aux(const std::byte* row, uint32_t row_bytes, uint64_t seed, uint64_t room) {
  if (row_bytes <= room_stamp_bytes)
    return true;
  return check_words(row + room_stamp_bytes, (row_bytes - room_stamp_bytes) & ~7u,
                     unit_seed(seed, room, UINT64_MAX, 0));
}

void fill_state(std::byte* item, uint64_t len, uint64_t seed, uint64_t room, uint32_t component,
                uint32_t buffer, uint32_t index) {
  fill_words(item, len & ~7ull,
             unit_seed(seed, room, UINT64_MAX - 1 - component, (uint64_t{buffer} << 32) | index));
}

bool check_state(const std::byte* item, uint64_t len, uint64_t seed, uint64_t room,
                 uint32_t component, uint32_t buffer, uint32_t index) {
  return check_words(
      item, len & ~7ull,
      unit_seed(seed, room, UINT64_MAX - 1 - component, (uint64_t{buffer} << 32) | index));
}

}  // namespace kvferry::apps
