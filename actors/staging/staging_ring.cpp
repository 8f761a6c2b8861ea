#include "actors/staging/staging_ring.hpp"

namespace kvferry {

std::optional<ring_grant> staging_ring::assign(uint64_t bytes) {
  if (bytes == 0 || bytes > size_)
    return std::nullopt;
  auto offset = head_ % size_;
  if (offset + bytes > size_)
    head_ += size_ - offset;  // the tail of this round is skipped
  ring_grant g{head_, head_ % size_, head_ + bytes};
  head_ = g.end;
  held_.emplace(g.start, g.end);
  return g;
}

bool staging_ring::release(uint64_t start) {
  auto i = held_.find(start);
  if (i == held_.end())
    return false;
  bool oldest = i == held_.begin();
  held_.erase(i);
  return oldest;
}

uint64_t staging_ring::watermark() const {
  return held_.empty() ? head_ : held_.begin()->first;
}

size_t staging_ring::held() const {
  return held_.size();
}

}  // namespace kvferry
