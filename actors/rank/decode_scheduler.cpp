// The decode rank's answers to its scheduler: open a room (and start what it
// needs: the prefill instance's handshake, the decider's key), init it with
// its destination pages, clear it. A poll and an abort are the same on both
// ranks (room_steps.hpp).
#include "actors/rank/decode_rank_steps.hpp"
#include "actors/rank/room_steps.hpp"
#include "messages/room.hpp"
#include "messages/scheduler.hpp"

namespace kvferry::decode_steps {

/// The scheduler opened room `id`, whose prefill instance is at `where`.
void open_room(self_ptr self, uint64_t id, const bootstrap_locator& where, room_slot_ptr slot) {
  auto& st = self->state;
  if (refuse_reopen(st.rooms, id, slot, st.cfg.self))
    return;
  auto key = where.key();
  auto& room =
      st.rooms
          .try_emplace(id, id, std::move(slot), key, st.cfg.self, st.cfg.pool.layout, st.cfg.limits)
          .first->second;
  auto [p, fresh] = st.peers.try_emplace(key);
  if (fresh)
    p->second.where = where;
  join(self, room);
  switch (p->second.phase) {
    case prefill_peer::stage::ready:
      advance(self, room);
      break;
    case prefill_peer::stage::refused:
      report(self, room, p->second.refusal);
      break;
    case prefill_peer::stage::down:
      fail_fast(self, room, p->second);
      break;
    case prefill_peer::stage::resolving:
      start_resolve(self, key);
      break;
  }
  sync(self, room);
}

/// The scheduler's init of a room: where its KV, aux row and states go.
caf::result<void> init_room(self_ptr self, receiver_init& msg) {
  auto i = self->state.rooms.find(msg.room);
  if (i == self->state.rooms.end())
    return unknown_room(self->state.cfg.self, msg.room);
  auto& room = i->second;
  if (auto bad = room.init(std::move(msg.dst_pages), msg.aux_slot, std::move(msg.states),
                           msg.prefix_tokens)) {
    report(self, room, std::move(*bad));
    return caf::unit;
  }
  // Cleared before any write can come: a stale row never passes the check.
  if (room.aux_slot() != no_aux_slot)
    write_stamp(self->state.cfg.pool, room.aux_slot(), room_key{});
  advance(self, room);
  sync(self, room);
  return caf::unit;
}

/// The scheduler is done with room `id`: it leaves, and its pages go back
/// once nothing more can land in them.
caf::result<void> clear_room(self_ptr self, uint64_t id) {
  auto& st = self->state;
  auto* cleared = room_to_clear(self, id, "the decode scheduler", report);
  if (!cleared)
    return unknown_room(st.cfg.self, id);
  auto& room = *cleared;
  if (st.registered)
    self->send(st.decider, room_leave{room.key(), st.cfg.self});
  // Cleared before its verdict: nothing more may land in its pages.
  if (!room.fsm().terminal() || !room.slot() || !room.slot()->released())
    if (!st.draining.contains(room.key().generation))
      release(self, room);
  st.room_deadlines.disarm(id);
  st.rooms.erase(id);
  st.finish_told.erase(id);
  return caf::unit;
}

}  // namespace kvferry::decode_steps
