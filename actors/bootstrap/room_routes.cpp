#include "actors/bootstrap/room_routes.hpp"

namespace kvferry {

std::optional<std::string> room_routes::set_follows_room(bool follows,
                                                         const std::string& instance) {
  auto name = [](bool f) {
    return f ? std::string{"follow_bootstrap_room"} : std::string{"registered rooms"};
  };
  if (follows_room_ && *follows_room_ != follows)
    return "prefill instance " + instance + " routes rooms to DP groups by " +
           name(*follows_room_) + " as its ranks said; refused a rank's " + name(follows) +
           " (expected every rank of the instance with one load_balance_method)";
  follows_room_ = follows;
  return std::nullopt;
}

std::optional<std::string> room_routes::add(uint64_t room, uint32_t group, uint32_t dp_size,
                                            const std::string& instance, int64_t now_ns) {
  auto what = "room " + std::to_string(room) + " of prefill instance " + instance;
  if (dp_size == 0)
    return what + ": DP group " + std::to_string(group) +
           " registered before any rank said the instance's DP size; expected a rank of the "
           "group registered first";
  if (group >= dp_size)
    return what + ": DP group " + std::to_string(group) + "; expected 0 to " +
           std::to_string(dp_size - 1) + " (dp_size " + std::to_string(dp_size) + ")";
  expire(now_ns);
  auto i = groups_.find(room);
  if (i != groups_.end()) {
    if (i->second.group != group)
      return what + " is served by DP group " + std::to_string(i->second.group) +
             "; refused DP group " + std::to_string(group) +
             " (two requests with one bootstrap_room?)";
    return std::nullopt;
  }
  if (capacity_ == 0)
    return what + ": no room can be registered (capacity 0)";
  while (groups_.size() >= capacity_ && !order_.empty()) {
    groups_.erase(order_.front().second);
    order_.pop_front();
    ++evicted_;
  }
  groups_.emplace(room, entry{group, now_ns});
  order_.emplace_back(now_ns, room);
  return std::nullopt;
}

std::vector<std::pair<uint64_t, uint32_t>> room_routes::find(const std::vector<uint64_t>& rooms,
                                                             int64_t now_ns) {
  expire(now_ns);
  std::vector<std::pair<uint64_t, uint32_t>> out;
  for (auto room : rooms)
    if (auto i = groups_.find(room); i != groups_.end())
      out.emplace_back(room, i->second.group);
  return out;
}

void room_routes::expire(int64_t now_ns) {
  auto oldest = now_ns - ttl_.count();
  while (!order_.empty() && order_.front().first <= oldest) {
    groups_.erase(order_.front().second);
    order_.pop_front();
  }
}

}  // namespace kvferry
