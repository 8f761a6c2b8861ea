#include "apps/common/kv_pattern.hpp"

#include <cstring>

#include "messages/layout.hpp"

namespace kvferry::apps {

namespace {

inline uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

inline uint64_t base_of(uint64_t seed, uint64_t room, uint32_t page, uint32_t buffer) {
  return mix(mix(mix(seed) ^ room) ^ ((uint64_t{page} << 32) | buffer));
}

}  // namespace

void fill_pattern(std::byte* dst, uint64_t len, uint64_t seed, uint64_t room, uint32_t page,
                  uint32_t buffer) {
  auto base = base_of(seed, room, page, buffer);
  auto* w = reinterpret_cast<uint64_t*>(dst);
  // An LCG step per word: cheap enough to fill at memory speed, and different
  // for every (room, page, buffer, offset).
  uint64_t x = base;
  for (uint64_t i = 0; i < len / 8; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    w[i] = x ^ (x >> 29);
  }
}

bool check_pattern(const std::byte* src, uint64_t len, uint64_t seed, uint64_t room, uint32_t page,
                   uint32_t buffer) {
  auto base = base_of(seed, room, page, buffer);
  auto* w = reinterpret_cast<const uint64_t*>(src);
  uint64_t x = base;
  uint64_t diff = 0;
  for (uint64_t i = 0; i < len / 8; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    diff |= w[i] ^ (x ^ (x >> 29));
  }
  return diff == 0;
}

void fill_aux(std::byte* row, uint32_t row_bytes, uint64_t seed, uint64_t room) {
  if (row_bytes > room_stamp_bytes)
    fill_pattern(row + room_stamp_bytes, (row_bytes - room_stamp_bytes) & ~7u, seed, room,
                 UINT32_MAX, UINT32_MAX);
}

bool check_aux(const std::byte* row, uint32_t row_bytes, uint64_t seed, uint64_t room) {
  if (row_bytes <= room_stamp_bytes)
    return true;
  return check_pattern(row + room_stamp_bytes, (row_bytes - room_stamp_bytes) & ~7u, seed, room,
                       UINT32_MAX, UINT32_MAX);
}

}  // namespace kvferry::apps
