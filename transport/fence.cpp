#include "transport/fence.hpp"

namespace kvferry::transport {

void fence_table::open(uint64_t token) {
  if (token == 0)
    return;
  std::lock_guard guard{mu_};
  open_.insert(token);
}

bool fence_table::close(uint64_t token) {
  if (token == 0)
    return true;
  std::lock_guard guard{mu_};
  open_.erase(token);
  return busy_.count(token) == 0;
}

bool fence_table::enter(uint64_t token) {
  if (token == 0)
    return true;
  std::lock_guard guard{mu_};
  if (open_.count(token) == 0)
    return false;
  ++busy_[token];
  return true;
}

void fence_table::leave(uint64_t token) {
  if (token == 0)
    return;
  std::lock_guard guard{mu_};
  auto i = busy_.find(token);
  if (i != busy_.end() && --i->second == 0)
    busy_.erase(i);
}

}  // namespace kvferry::transport
