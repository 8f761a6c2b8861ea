#include "transport/segment_copy.hpp"

#include <cstring>
#include <string>

namespace kvferry::transport {

namespace {

/// Empty when [offset, offset + length) fits in `size`, else the refusal.
status check_one(size_t index, const char* which, uint64_t offset, uint64_t length,
                 const char* buffer, uint64_t size) {
  // offset <= size first, so size - offset cannot wrap; this also refuses an
  // offset + length that overflows 64 bits.
  if (offset <= size && length <= size - offset)
    return {};
  return status::out_of_bounds("copy segment " + std::to_string(index) + ": " + which + " " +
                               std::to_string(offset) + " + length " + std::to_string(length) +
                               " past the " + buffer + " (" + std::to_string(size) + " B)");
}

}  // namespace

status check_segments(std::span<const copy_segment> segments, uint64_t src_size,
                      uint64_t dst_size) {
  for (size_t i = 0; i < segments.size(); ++i) {
    auto& s = segments[i];
    if (auto st = check_one(i, "src_offset", s.src_offset, s.length, "source", src_size); !st.ok())
      return st;
    if (auto st = check_one(i, "dst_offset", s.dst_offset, s.length, "destination", dst_size);
        !st.ok())
      return st;
  }
  return {};
}

uint64_t total_bytes(std::span<const copy_segment> segments) {
  uint64_t n = 0;
  for (auto& s : segments)
    n += s.length;
  return n;
}

status copy_segments_cpu(std::span<std::byte> dst, std::span<const std::byte> src,
                         std::span<const copy_segment> segments) {
  if (auto st = check_segments(segments, src.size(), dst.size()); !st.ok())
    return st;
  for (auto& s : segments)
    if (s.length > 0)
      std::memcpy(dst.data() + s.dst_offset, src.data() + s.src_offset, s.length);
  return {};
}

}  // namespace kvferry::transport
