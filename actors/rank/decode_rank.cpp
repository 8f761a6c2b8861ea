// The decode rank actor: its start and its behaviour, which dispatches each
// message to its step. A room's life is decode_rooms.cpp's; finding,
// shaking hands with and losing prefill instances are decode_handshake.cpp's
// and decode_peers.cpp's.
#include "actors/rank/decode_rank.hpp"

#include <caf/actor_cast.hpp>

#include "actors/base/guard.hpp"
#include "actors/base/log.hpp"
#include "actors/plan/room_grant.hpp"
#include "actors/plan/tp_mapping.hpp"
#include "actors/rank/decider_side.hpp"
#include "actors/rank/decode_rank_steps.hpp"
#include "actors/rank/rank_guard.hpp"
#include "actors/rank/room_steps.hpp"
#include "messages/room.hpp"
#include "messages/scheduler.hpp"

namespace kvferry {

namespace decode_steps {
/// The rank's start: its down handler and its registration with the
/// decider.
void start_decode_rank(self_ptr self, decode_rank_config cfg) {
  self->state.cfg = std::move(cfg);
  self->set_down_handler(
      guard(self, on_exception, [self](caf::down_msg& dm) { on_down(self, dm); }));
  register_with_decider(self);
}

}  // namespace decode_steps

decode_rank_actor::behavior_type decode_rank(
    decode_rank_actor::stateful_pointer<decode_rank_state> self, decode_rank_config cfg) {
  using namespace decode_steps;
  start_decode_rank(self, std::move(cfg));
  return guarded<decode_rank_actor::behavior_type>(
      self, on_exception,
      // -- scheduler ------------------------------------------------------------
      [self](room_open_atom, uint64_t id, bootstrap_locator& where, room_slot_ptr& slot) {
        from_scheduler(self, "room_open", [&] { open_room(self, id, where, std::move(slot)); });
      },
      [self](receiver_init& msg) -> caf::result<void> {
        return from_scheduler(self, "receiver_init", [&] { return init_room(self, msg); });
      },
      [self](room_abort_atom, uint64_t id) -> caf::result<void> {
        return from_scheduler(self, "room_abort",
                              [&] { return abort_room(self, id, "the decode scheduler", report); });
      },
      [self](room_clear_atom, uint64_t id) -> caf::result<void> {
        return from_scheduler(self, "room_clear", [&] { return clear_room(self, id); });
      },
      [self](room_poll_atom, uint64_t id) -> caf::result<room_status> {
        return from_scheduler(self, "room_poll", [&] { return poll_room(self, id); });
      },
      // -- prefill ranks and their bootstraps -----------------------------------
      [self](chunk_landed& msg) { on_chunk(self, msg); },
      [self](chunk_scattered& msg) { on_scattered(self, msg); },
      [self](rank_left& msg) {
        lose_source(self, msg.rank, msg.reason, msg.link_lost,
                    msg.orderly ? spdlog::level::info : spdlog::level::warn, &msg);
      },
      [self](topology& topo) { on_whole_again(self, std::move(topo)); },
      // -- the decider ----------------------------------------------------------
      [self](room_keyed& msg) { on_keyed(self, msg); },
      [self](room_verdict& msg) { on_verdict(self, msg); },
      [self](heartbeat_atom, uint64_t seq) -> caf::result<heartbeat_atom, uint64_t> {
        answer_ping(self, [self](const decode_room& room) { return decider_of(self, room); });
        return {heartbeat_atom_v, seq};
      },
      // -- kvferry-ctl trace ----------------------------------------------------
      [self](trace_atom, uint64_t room) -> caf::result<room_trace> {
        return self->state.events.of_room(room, to_string(self->state.cfg.self));
      },
      // -- timers ---------------------------------------------------------------
      [self](heartbeat_tick_atom) {
        check_beat(
            self, [self](const decode_room& room) { return decider_of(self, room); },
            [self](decode_room& room, const failure& why) {
              settle(self, room, kv_poll::failed, why);
            });
      },
      [self](deadline_atom) { deadlines_due(self, on_deadline); },
      [self](retry_atom, std::string& key) { probe(self, key); },
      [self](register_atom) {
        if (!self->state.registered)
          register_with_decider(self);
      },
      [self](quiesce_atom) { quiesce(self); });
}

}  // namespace kvferry
