#include "transport/base/fence_table.hpp"

#include <algorithm>

namespace kvferry::transport {

void fence_table::open(uint64_t token, grant g) {
  if (token == 0)
    return;
  std::sort(g.buffers.begin(), g.buffers.end(), [](auto& a, auto& b) {
    return a.region != b.region ? a.region < b.region : a.offset < b.offset;
  });
  bool any = trust_ && g.buffers.empty();
  std::lock_guard guard{mu_};
  open_[token] = entry{std::move(g), any};
}

bool fence_table::close(uint64_t token) {
  if (token == 0)
    return true;
  std::lock_guard guard{mu_};
  open_.erase(token);
  return busy_.count(token) == 0;
}

void fence_table::leave(uint64_t token) {
  std::lock_guard guard{mu_};
  auto i = busy_.find(token);
  if (i != busy_.end() && --i->second == 0)
    busy_.erase(i);
}

status fence_table::admit_locked(uint64_t token, const std::string& sender) const {
  if (token == 0) {
    if (trust_)
      return {};
    return status::not_granted("fence 0 admits nothing: a write needs the fence of an open room");
  }
  auto f = open_.find(token);
  if (f == open_.end())
    return status::fenced("fence " + std::to_string(token) +
                          " is closed at the receiver: the room's memory was released");
  if (f->second.any)
    return {};
  auto& senders = f->second.g.senders;
  if (std::find(senders.begin(), senders.end(), sender) == senders.end())
    return status::not_granted("fence " + std::to_string(token) + " grants nothing to '" + sender +
                               "'");
  return {};
}

const grant* fence_table::granted_locked(uint64_t token) const {
  if (token == 0)
    return nullptr;  // trusted (admit_locked refused it otherwise)
  auto& e = open_.at(token);
  return e.any ? nullptr : &e.g;
}

status fence_table::check(const grant& g, uint64_t token, const std::string& sender, size_t k,
                          uint32_t region, uint64_t offset, uint64_t length) {
  auto refuse = [&] {
    return status::not_granted("fence " + std::to_string(token) + ": op " + std::to_string(k) +
                               " (region " + std::to_string(region) + ", offset " +
                               std::to_string(offset) + ", " + std::to_string(length) +
                               " B) is outside what was granted to '" + sender + "'");
  };
  if (length == 0)
    return {};
  // The last buffer of `region` starting at or before `offset`.
  auto b = std::upper_bound(g.buffers.begin(), g.buffers.end(), std::make_pair(region, offset),
                            [](auto& key, const granted_buffer& x) {
                              return key.first != x.region ? key.first < x.region
                                                           : key.second < x.offset;
                            });
  if (b == g.buffers.begin())
    return refuse();
  --b;
  if (b->region != region || offset - b->offset >= b->length ||
      length > b->length - (offset - b->offset))
    return refuse();
  if (!b->items)
    return {};
  if (b->item_len == 0)
    return refuse();
  uint64_t first = (offset - b->offset) / b->item_len;
  uint64_t last = (offset - b->offset + length - 1) / b->item_len;
  auto& items = *b->items;
  auto i = std::lower_bound(items.begin(), items.end(), first);
  for (uint64_t want = first; want <= last; ++want, ++i)
    if (i == items.end() || *i != want)
      return refuse();
  return {};
}

}  // namespace kvferry::transport
