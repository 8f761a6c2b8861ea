// A rank's view of its own KV pool: the layout it publishes (region ids and
// offsets) plus the addresses behind it, which never leave the process. The
// room stamp lives in the first bytes of aux buffer 0's row.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "messages/ids.hpp"
#include "messages/layout.hpp"

namespace kvferry {

struct local_pool {
  kv_layout layout;
  std::vector<std::byte*> kv_bases;   ///< address of page 0 of each KV buffer
  std::vector<std::byte*> aux_bases;  ///< address of row 0 of each aux buffer

  /// Address of aux row `slot` of aux buffer `buffer`.
  std::byte* aux_row(size_t buffer, uint32_t slot) const {
    return aux_bases[buffer] + uint64_t{slot} * layout.aux_buffers[buffer].item_len;
  }
};

/// Writes {room, generation} into the stamp of aux row `slot`. No-op without aux.
void write_stamp(const local_pool& pool, uint32_t slot, const room_key& key);

/// Reads the stamp of aux row `slot`; {0, 0} without aux.
room_key read_stamp(const local_pool& pool, uint32_t slot);

}  // namespace kvferry
