#include "actors/facade/receiver.hpp"

#include <caf/send.hpp>

#include "messages/room.hpp"
#include "messages/scheduler.hpp"

namespace kvferry {

receiver::receiver(decode_rank_actor rank, uint64_t room, room_slot_ptr slot)
    : rank_(std::move(rank)), room_(room), slot_(std::move(slot)) {}

receiver& receiver::operator=(receiver&& other) noexcept {
  if (this != &other) {
    clear();
    rank_ = std::move(other.rank_);
    room_ = other.room_;
    slot_ = std::move(other.slot_);
    cleared_ = other.cleared_;
    other.cleared_ = true;
  }
  return *this;
}

receiver::~receiver() {
  clear();
}

void receiver::init(std::vector<uint32_t> dst_pages, std::optional<uint32_t> aux_slot) {
  caf::anon_send(rank_, receiver_init{room_, std::move(dst_pages), aux_slot.value_or(no_aux_slot)});
}

void receiver::abort() {
  caf::anon_send(rank_, room_abort_atom_v, room_);
}

void receiver::clear() {
  if (cleared_ || !rank_)
    return;
  cleared_ = true;
  caf::anon_send(rank_, room_clear_atom_v, room_);
}

}  // namespace kvferry
