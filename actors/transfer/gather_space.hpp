// Space in a prefill rank's gather buffer, where staged chunks are gathered
// before their bulk write: first fit over the free gaps, given back when the
// write completed (the transport reads the bytes until then). Plain logic.
#pragma once

#include <cstdint>
#include <map>
#include <optional>

namespace kvferry {

class gather_space {
 public:
  explicit gather_space(uint64_t size = 0) : size_(size) {}

  uint64_t size() const { return size_; }

  /// The offset of `bytes` free bytes (1..size()), or nullopt if no gap holds
  /// them now.
  std::optional<uint64_t> take(uint64_t bytes) {
    if (bytes == 0 || bytes > size_)
      return std::nullopt;
    uint64_t at = 0;
    for (auto& [offset, length] : used_) {
      if (offset - at >= bytes)
        break;
      at = offset + length;
    }
    if (at + bytes > size_)
      return std::nullopt;
    used_.emplace(at, bytes);
    return at;
  }

  /// Gives back the space taken at `offset`.
  void give(uint64_t offset) { used_.erase(offset); }

  bool idle() const { return used_.empty(); }

 private:
  uint64_t size_;
  std::map<uint64_t, uint64_t> used_;  // offset -> length
};

}  // namespace kvferry
