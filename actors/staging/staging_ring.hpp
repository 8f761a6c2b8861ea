// The staging ring's allocator, plain logic: space is handed out by rounds
// over a ring of fixed size, and a watermark says how far the bytes handed
// out have been consumed (scattered, or given up with their room).
//
// Positions are linear: byte `o` of round `r` is at r * size + o. A grant
// [start, end) in linear bytes reuses the bytes that [start - size, end -
// size) held one round earlier, so it may be written once the watermark (the
// start of the oldest grant still held, or the head when none is) has reached
// end - size: see may_write(). The allocator never waits: it hands out space
// ahead of the watermark (the writer waits instead), so a chunk that must wait
// for space holds up nobody but the writes behind it in the ring.
//
// A grant that does not fit before the end of the ring starts the next round
// at offset 0; the skipped tail counts as consumed. The watermark only moves
// forward.
#pragma once

#include <cstdint>
#include <map>
#include <optional>

namespace kvferry {

/// Space handed out in the ring.
struct ring_grant {
  uint64_t start = 0;   ///< linear position of the first byte; the grant's id
  uint64_t offset = 0;  ///< where it lies in the ring: start % size
  uint64_t end = 0;     ///< linear position one past the last byte

  friend bool operator==(const ring_grant&, const ring_grant&) = default;
};

class staging_ring {
 public:
  explicit staging_ring(uint64_t size) : size_(size) {}

  uint64_t size() const { return size_; }

  /// Hands out `bytes` (1..size()); nullopt for 0 or more than the ring holds.
  std::optional<ring_grant> assign(uint64_t bytes);

  /// Gives back the grant that starts at `start` (its bytes were consumed);
  /// unknown starts are ignored. Returns true if the watermark moved.
  bool release(uint64_t start);

  /// Linear position up to which every byte handed out was consumed.
  uint64_t watermark() const;

  /// Grants still held.
  size_t held() const;

  /// Bytes handed out and not consumed yet.
  uint64_t in_use() const { return head_ - watermark(); }

 private:
  uint64_t size_;
  uint64_t head_ = 0;                  // linear position of the next grant
  std::map<uint64_t, uint64_t> held_;  // start -> end, in ring order
};

/// Whether a writer may write a grant that ends at linear position `end` into
/// a ring of `size` bytes whose watermark (as last heard) is `watermark`: the
/// bytes it reuses from the round before were consumed.
inline bool may_write(uint64_t end, uint64_t size, uint64_t watermark) {
  return end <= watermark + size;
}

}  // namespace kvferry
