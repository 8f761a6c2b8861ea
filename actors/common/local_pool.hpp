// A rank's view of its own KV pool: the layout it publishes (region ids and
// offsets) plus the addresses behind it, which never leave the process. The
// room stamp lives in the first bytes of aux buffer 0's row.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "messages/ids.hpp"
#include "messages/layout.hpp"
#include "transport/device_memory.hpp"
#include "transport/segment_copy.hpp"

namespace kvferry {

struct local_pool {
  kv_layout layout;
  std::vector<std::byte*> kv_bases;   ///< address of page 0 of each KV buffer
  std::vector<std::byte*> aux_bases;  ///< address of row 0 of each aux buffer
  /// Set where KV buffers are device memory: staging's gather and scatter run
  /// on it (the CUDA kernel on a GPU).
  std::shared_ptr<transport::device_copier> device;

  /// Staging's gather or scatter between a KV buffer and the ring or gather
  /// buffer: with the device copier where there is one, on the CPU otherwise.
  transport::status copy_segments(std::span<std::byte> dst, std::span<const std::byte> src,
                                  std::span<const transport::copy_segment> segments) const {
    return device ? device->copy_segments(dst, src, segments)
                  : transport::copy_segments_cpu(dst, src, segments);
  }

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
