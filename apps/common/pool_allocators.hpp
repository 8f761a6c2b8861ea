// What the synthetic scheduler hands out to the rooms it opens: a pool's
// free pages (in random order, as a serving engine's allocator leaves them
// scattered) and its aux rows.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <vector>

namespace kvferry::apps {

/// Free pages of a pool, handed out in random order.
class page_allocator {
 public:
  page_allocator(uint32_t pages, uint64_t seed) : rng_(seed) {
    free_.resize(pages);
    for (uint32_t i = 0; i < pages; ++i)
      free_[i] = i;
  }

  std::optional<std::vector<uint32_t>> take(uint32_t n) {
    if (n > free_.size())
      return std::nullopt;
    std::vector<uint32_t> out;
    out.reserve(n);
    for (uint32_t i = 0; i < n; ++i) {
      std::uniform_int_distribution<size_t> pick(0, free_.size() - 1);
      auto k = pick(rng_);
      out.push_back(free_[k]);
      free_[k] = free_.back();
      free_.pop_back();
    }
    return out;
  }

  void give_back(const std::vector<uint32_t>& pages) {
    free_.insert(free_.end(), pages.begin(), pages.end());
  }

 private:
  std::mt19937_64 rng_;
  std::vector<uint32_t> free_;
};

/// Free aux rows, first in first out.
class row_allocator {
 public:
  explicit row_allocator(uint32_t rows) {
    for (uint32_t i = 0; i < rows; ++i)
      free_.push_back(i);
  }
  std::optional<uint32_t> take() {
    if (free_.empty())
      return std::nullopt;
    auto r = free_.front();
    free_.pop_front();
    return r;
  }
  void give_back(uint32_t r) { free_.push_back(r); }

 private:
  std::deque<uint32_t> free_;
};

}  // namespace kvferry::apps
