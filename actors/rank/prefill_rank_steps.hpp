// The steps of the prefill rank actor, shared by its files: a room's life
// (prefill_rooms.cpp: open, requests, init, chunks, written, verdict,
// deadline) and its peers (prefill_peers.cpp: decode ranks' registrations,
// the bootstrap, losses); prefill_rank.cpp's behaviour dispatches to both.
// Internal to the actor; nothing else includes it.
#pragma once

#include <string>

#include "actors/base/guard.hpp"
#include "actors/rank/prefill_rank.hpp"

namespace kvferry::prefill_steps {

using self_ptr = prefill_rank_actor::stateful_pointer<prefill_rank_state>;

// -- a room's life (prefill_rooms.cpp) ------------------------------------------

/// An exception escaped a handler: every live room of this rank fails with it.
failure on_exception(self_ptr self, const std::string& what);

/// Mirrors the room's state into its published slot and schedules its
/// deadline; a concluded room with no write in flight releases its pages.
void sync(self_ptr self, prefill_room& room);

/// Concludes a room with the decider's verdict (or alone), and releases its
/// source pages once no write of it is in flight.
void settle(self_ptr self, prefill_room& room, kv_poll outcome, const failure& why);

/// The room's decider was lost: this rank concludes without a verdict, and
/// tells the other ranks of the instance, which may hold the room with no
/// decode rank asking (their own deadline would word it otherwise).
void settle_without_decider(self_ptr self, prefill_room& room, const failure& why);

/// A fault this rank saw in a room: the room's decider decides; without one
/// (no decode rank has asked for the room yet) the rank concludes alone.
void report(self_ptr self, prefill_room& room, failure why);

/// Hands every chunk that can go now to the transfer actor.
void dispatch(self_ptr self, prefill_room& room);

/// The decider of a room (null while no decode rank asked for it).
decider_actor decider_of(self_ptr self, const prefill_room& room);

/// Room `id`'s deadline (armed at `epoch`) went off.
void on_deadline(self_ptr self, uint64_t id, uint64_t epoch);

/// The scheduler's calls: open, init, a chunk, clear.
void open_room(self_ptr self, uint64_t id, room_slot_ptr slot);
caf::result<void> init_room(self_ptr self, const sender_init& msg);
caf::result<void> send_chunk(self_ptr self, chunk_send& msg);
caf::result<void> clear_room(self_ptr self, uint64_t id);

/// The transfer actor's result for a chunk: decode hears it landed.
void on_written(self_ptr self, chunk_result& r);

/// The room opened: the requests and verdict that came first take effect.
void open_waited(self_ptr self, prefill_room& room, early_arrivals::waiting entry);

/// The time of a room requested but not opened ran out.
void expire_waiting(self_ptr self, uint64_t id, uint64_t generation);

/// Arms the expiry of room `id`'s wait (generation `generation`, the
/// Bootstrapping limit from now) behind the rank's one expiry timer.
void arm_expiry(self_ptr self, uint64_t id, uint64_t generation);

/// The expiry timer went off: each wait due expires, the timer is set again.
void expiries_due(self_ptr self);

/// A decode rank asks for a room; another rank of the instance concluded
/// one that lost its decider; a decider's verdict.
void on_request(self_ptr self, room_request& req);
void on_sibling_concluded(self_ptr self, sibling_concluded& c);
void on_verdict(self_ptr self, room_verdict& v);

// -- peers (prefill_peers.cpp) -----------------------------------------------

/// Registers this rank with its instance's bootstrap (again, on failure).
void register_with_bootstrap(self_ptr self);

/// A monitored actor went down: a decider of rooms here, or a decode rank.
void on_down(self_ptr self, const caf::down_msg& dm);

caf::result<dest_accepted> accept_decode(self_ptr self, dest_registration& reg);
void on_control_endpoint(self_ptr self, control_endpoint& at);
void on_instance_topology(self_ptr self, topology& topo);

}  // namespace kvferry::prefill_steps
