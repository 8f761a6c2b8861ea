#include "actors/facade/sender.hpp"

#include <caf/send.hpp>

#include "messages/room.hpp"
#include "messages/scheduler.hpp"

namespace kvferry {

sender::sender(prefill_rank_actor rank, uint64_t room, room_slot_ptr slot)
    : rank_(std::move(rank)), room_(room), slot_(std::move(slot)) {}

sender& sender::operator=(sender&& other) noexcept {
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

sender::~sender() {
  clear();
}

void sender::init(uint32_t num_pages, std::optional<uint32_t> aux_slot) {
  caf::anon_send(rank_, sender_init{room_, num_pages, aux_slot.value_or(no_aux_slot)});
}

void sender::send(std::vector<uint32_t> pages, bool last) {
  caf::anon_send(rank_, chunk_send{room_, std::move(pages), last});
}

void sender::abort() {
  caf::anon_send(rank_, room_abort_atom_v, room_);
}

void sender::clear() {
  if (cleared_ || !rank_)
    return;
  cleared_ = true;
  caf::anon_send(rank_, room_clear_atom_v, room_);
}

}  // namespace kvferry
