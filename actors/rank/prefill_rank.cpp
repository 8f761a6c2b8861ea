// The prefill rank actor: its start and its behaviour, which dispatches each
// message to its step. A room's life is prefill_rooms.cpp's; registrations,
// the bootstrap and losing peers are prefill_peers.cpp's.
#include "actors/rank/prefill_rank.hpp"

#include <chrono>

#include "actors/base/log.hpp"
#include "actors/rank/decider_side.hpp"
#include "actors/rank/prefill_rank_steps.hpp"
#include "actors/rank/rank_guard.hpp"
#include "actors/rank/room_steps.hpp"
#include "messages/scheduler.hpp"
#include "messages/transfer.hpp"

namespace kvferry {

namespace {

/// The rank's start: its down handler, its link to the transfer actor (which
/// lives and dies with it: no orphan keeps writing), and its registration
/// with the bootstrap unless it is published first.
void start_prefill_rank(prefill_rank_actor::stateful_pointer<prefill_rank_state> self,
                        prefill_rank_config cfg) {
  using namespace prefill_steps;
  self->state.cfg = std::move(cfg);
  self->set_down_handler(
      guard(self, on_exception, [self](caf::down_msg& dm) { on_down(self, dm); }));
  self->link_to(self->state.cfg.transfer);
  if ((!self->state.cfg.bootstrap.host.empty() || self->state.cfg.bootstrap.handle) &&
      !self->state.cfg.publish_first)
    register_with_bootstrap(self);
}

}  // namespace

prefill_rank_actor::behavior_type prefill_rank(
    prefill_rank_actor::stateful_pointer<prefill_rank_state> self, prefill_rank_config cfg) {
  using namespace prefill_steps;
  start_prefill_rank(self, std::move(cfg));
  return guarded<prefill_rank_actor::behavior_type>(
      self, on_exception,
      // -- scheduler ------------------------------------------------------------
      [self](room_open_atom, uint64_t id, room_slot_ptr slot) {
        from_scheduler(self, "room_open", [&] { open_room(self, id, std::move(slot)); });
      },
      [self](sender_init& msg) -> caf::result<void> {
        return from_scheduler(self, "sender_init", [&] { return init_room(self, msg); });
      },
      [self](chunk_send& msg) -> caf::result<void> {
        return from_scheduler(self, "chunk_send", [&] { return send_chunk(self, msg); });
      },
      [self](room_abort_atom, uint64_t id) -> caf::result<void> {
        return from_scheduler(self, "room_abort", [&] {
          return abort_room(self, id, "the prefill scheduler", report);
        });
      },
      [self](room_clear_atom, uint64_t id) -> caf::result<void> {
        return from_scheduler(self, "room_clear", [&] { return clear_room(self, id); });
      },
      [self](room_poll_atom, uint64_t id) -> caf::result<room_status> {
        return from_scheduler(self, "room_poll", [&] { return poll_room(self, id); });
      },
      // -- decode ranks, deciders and the bootstrap -----------------------------
      [self](dest_registration& reg) -> caf::result<dest_accepted> {
        return accept_decode(self, reg);
      },
      [self](room_request& req) { on_request(self, req); },
      [self](control_endpoint& at) { on_control_endpoint(self, at); },
      [self](topology& topo) { on_instance_topology(self, topo); },
      [self](sibling_concluded& c) { on_sibling_concluded(self, c); },
      [self](room_verdict& v) { on_verdict(self, v); },
      [self](heartbeat_atom, uint64_t seq) -> caf::result<heartbeat_atom, uint64_t> {
        answer_ping(self, [self](const prefill_room& room) { return decider_of(self, room); });
        return {heartbeat_atom_v, seq};
      },
      // -- kvferry-ctl trace ----------------------------------------------------
      [self](trace_atom, uint64_t room) -> caf::result<room_trace> {
        return self->state.events.of_room(room, to_string(self->state.cfg.self));
      },
      // -- transfer actor -------------------------------------------------------
      [self](chunk_result& r) { on_written(self, r); },
      // -- timers ---------------------------------------------------------------
      [self](deadline_atom) { deadlines_due(self, on_deadline); },
      [self](expire_atom) { expiries_due(self); },
      [self](register_atom) { register_with_bootstrap(self); },
      [self](heartbeat_tick_atom) {
        check_beat(
            self, [self](const prefill_room& room) { return decider_of(self, room); },
            [self](prefill_room& room, const failure& why) {
              settle(self, room, kv_poll::failed, why);
            });
      });
}

}  // namespace kvferry
