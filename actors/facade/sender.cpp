#include "actors/facade/sender.hpp"

#include "messages/scheduler.hpp"

namespace kvferry {

void sender::init(uint32_t num_pages, std::optional<uint32_t> aux_slot) {
  caf::send_as(rank_, rank_, sender_init{room_, num_pages, aux_slot.value_or(no_aux_slot)});
}

void sender::send(std::vector<uint32_t> pages, bool last,
                  std::vector<std::vector<uint32_t>> states) {
  caf::send_as(rank_, rank_, chunk_send{room_, std::move(pages), last, std::move(states)});
}

}  // namespace kvferry
