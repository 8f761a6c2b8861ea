#include "actors/facade/receiver.hpp"

#include "messages/scheduler.hpp"

namespace kvferry {

void receiver::init(std::vector<uint32_t> dst_pages, std::optional<uint32_t> aux_slot,
                    std::vector<std::vector<uint32_t>> states, uint32_t prefix_tokens) {
  caf::send_as(rank_, rank_,
               receiver_init{room_, std::move(dst_pages), aux_slot.value_or(no_aux_slot),
                             std::move(states), prefix_tokens});
}

}  // namespace kvferry
