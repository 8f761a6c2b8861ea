#include "actors/plan/room_grant.hpp"

#include <algorithm>
#include <memory>

namespace kvferry {

namespace {

using item_set = std::shared_ptr<const std::vector<uint32_t>>;

item_set sorted_set(std::vector<uint32_t> items) {
  std::sort(items.begin(), items.end());
  items.erase(std::unique(items.begin(), items.end()), items.end());
  return std::make_shared<const std::vector<uint32_t>>(std::move(items));
}

void add(transport::grant& g, const std::vector<buffer_desc>& buffers, const item_set& items) {
  for (auto& b : buffers)
    g.buffers.push_back({b.region, b.offset, b.length, b.item_len, items});
}

}  // namespace

transport::grant room_grant(const kv_layout& local, std::vector<std::string> senders,
                            std::vector<uint32_t> pages, uint32_t aux_slot,
                            const std::vector<std::vector<uint32_t>>& states, granted_ring ring) {
  transport::grant g;
  g.senders = std::move(senders);
  add(g, local.kv_buffers, sorted_set(std::move(pages)));
  if (aux_slot != no_aux_slot)
    add(g, local.aux_buffers, sorted_set({aux_slot}));
  for (size_t i = 0; i < states.size() && i < local.states.size(); ++i)
    add(g, local.states[i].buffers, sorted_set(states[i]));
  if (ring.size > 0)
    g.buffers.push_back({ring.region, 0, ring.size, ring.size, nullptr});
  return g;
}

}  // namespace kvferry
