// What both rank actors do after every step of a room: mirror its state into
// the slot the scheduler polls, and turn a newly armed deadline into a delayed
// message to self.
#pragma once

#include <cstdint>

#include "actors/rank/room_fsm.hpp"
#include "messages/handles.hpp"
#include "messages/poll_snapshot.hpp"

namespace kvferry {

/// Mirrors `fsm` into `slot` (when there is one) and schedules its deadline as
/// (deadline_atom, room id, epoch) to `self`.
template <class Self>
void publish(Self* self, const room_slot_ptr& slot, const room_key& key, room_fsm& fsm) {
  if (slot) {
    if (fsm.state() == kv_poll::failed)
      slot->fail(key, fsm.why());
    else
      slot->advance(fsm.state());
  }
  if (auto t = fsm.take_timer())
    self->delayed_send(self, t->after, deadline_atom_v, key.room, t->epoch);
}

}  // namespace kvferry
