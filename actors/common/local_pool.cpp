#include "actors/common/local_pool.hpp"

#include <cstring>

namespace kvferry {

void write_stamp(const local_pool& pool, uint32_t slot, const room_key& key) {
  if (pool.aux_bases.empty())
    return;
  uint64_t words[2] = {key.room, key.generation};
  std::memcpy(pool.aux_row(0, slot), words, sizeof(words));
}

room_key read_stamp(const local_pool& pool, uint32_t slot) {
  if (pool.aux_bases.empty())
    return {};
  uint64_t words[2];
  std::memcpy(words, pool.aux_row(0, slot), sizeof(words));
  return room_key{words[0], words[1]};
}

}  // namespace kvferry
