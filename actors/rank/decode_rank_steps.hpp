// The steps of the decode rank actor, shared by its files: a room's life
// (decode_rooms.cpp: the scheduler's calls, join, requests, chunks, verdict,
// deadline; decode_pages.cpp: giving pages back) and the prefill side
// (decode_handshake.cpp: finding prefill instances and shaking hands with
// them; decode_peers.cpp: losing them); decode_rank.cpp's behaviour
// dispatches to both.
// Internal to the actor; nothing else includes it.
#pragma once

#include <chrono>
#include <string>

#include "actors/base/guard.hpp"
#include "actors/rank/decode_rank.hpp"

namespace kvferry::decode_steps {

using self_ptr = decode_rank_actor::stateful_pointer<decode_rank_state>;

/// How long a decode rank waits before it registers with a prefill instance
/// again after a refusal or a lost contact.
inline constexpr auto register_retry = std::chrono::seconds{1};

// -- a room's life (decode_rooms.cpp) -------------------------------------------

/// Mirrors the room's state into its published slot and arms its deadline.
void sync(self_ptr self, decode_room& room);

/// An exception escaped a handler: every live room of this rank fails with it.
failure on_exception(self_ptr self, const std::string& what);

/// Concludes a room with the decider's verdict, then releases its pages.
void settle(self_ptr self, decode_room& room, kv_poll outcome, const failure& why);

/// A fault this rank saw in a room: the decider decides. Without a decider to
/// reach, the rank concludes alone.
void report(self_ptr self, decode_room& room, failure why);

/// Tells the decider about the room: on open (to draw its key) and once the
/// prefill participants are known.
void join(self_ptr self, decode_room& room);

/// Moves a room as far as what is known allows: sources once the peer is
/// ready, requests once it is keyed and initialized.
void advance(self_ptr self, decode_room& room);

/// `f(room)` for each live room that needs the prefill instance at `key`.
template <class F>
void for_rooms_of(self_ptr self, const std::string& key, F f) {
  for (auto& [id, room] : self->state.rooms)
    if (room.peer() == key && !room.fsm().terminal())
      f(room);
}

// -- the scheduler's messages (decode_rooms.cpp) ---------------------------------

/// The decider of a room (null before it was keyed).
decider_actor decider_of(self_ptr self, const decode_room& room);

/// Room `id`'s deadline (armed at `epoch`) went off.
void on_deadline(self_ptr self, uint64_t id, uint64_t epoch);

/// A chunk landed (told by its source rank), or was scattered by the
/// staging actor; the decider keyed the room; the decider's verdict.
void on_chunk(self_ptr self, const chunk_landed& msg);
void on_scattered(self_ptr self, chunk_scattered& msg);
void on_keyed(self_ptr self, const room_keyed& msg);
void on_verdict(self_ptr self, const room_verdict& msg);

/// The rank's start: its down handler and its registration with the decider.
void start_decode_rank(self_ptr self, decode_rank_config cfg);

/// The scheduler opened room `id`, whose prefill instance is at `where`.
void open_room(self_ptr self, uint64_t id, const bootstrap_locator& where, room_slot_ptr slot);

/// The scheduler's init of a room: where its KV, aux row and states go.
caf::result<void> init_room(self_ptr self, receiver_init& msg);

/// The scheduler is done with room `id`: it leaves, and its pages go back
/// once nothing more can land in them.
caf::result<void> clear_room(self_ptr self, uint64_t id);

// -- pages (decode_pages.cpp) ---------------------------------------------------

/// A concluded room's pages go back once nothing more can land in them: at
/// once if its fence closes quiet, else after fence_drains sees it quiet.
void release(self_ptr self, decode_room& room);

/// The pages of concluded rooms whose fence is quiet now go back; writers
/// stuck half way through a batch are cut off.
void quiesce(self_ptr self);

// -- the prefill side: handshakes (decode_handshake.cpp) ------------------------

/// Finds the decider and registers with it (again, after it was lost).
void register_with_decider(self_ptr self);

/// Looks the prefill instance at `key` up (its topology, then a handshake).
void start_resolve(self_ptr self, const std::string& key);

/// A probe of a down instance is due.
void probe(self_ptr self, const std::string& key);

/// A topology of the instance at `key` came in.
void on_topology(self_ptr self, const std::string& key, topology topo);

/// An instance's bootstrap says it is whole again: the handshake restarts if
/// this rank holds it down.
void on_whole_again(self_ptr self, topology topo);

// -- the prefill side: losses (decode_peers.cpp) ---------------------------------

/// The pairing with the instance at `key` cannot work: its rooms fail with `why`.
void refuse(self_ptr self, const std::string& key, failure why);

/// A lookup or handshake of the instance at `key` failed with `error`: it is
/// tried again (after a backoff, or by a probe while it is down).
void resolve_failed(self_ptr self, const std::string& key, std::string error);

/// The prefill instance at `key` cannot serve rooms now: its live rooms here
/// fail with `why`, new ones fail at once with `cause` until a probe finds it
/// whole again. `survivors` are its ranks still there; none keeps the ones
/// known. `level`: how loud the news is (info for an orderly stop, which a
/// user need not look at).
void mark_down(self_ptr self, const std::string& key, const failure& why, failure cause,
               std::optional<std::vector<participant>> survivors = std::nullopt,
               spdlog::level::level_enum level = spdlog::level::warn);

/// A room that needs the down peer `peer`: the decider hears of it with the
/// prefill ranks still there, and it fails at once with the peer's cause.
void fail_fast(self_ptr self, decode_room& room, const prefill_peer& peer);

/// A prefill rank went down (a down_msg here, its bootstrap's rank_left with
/// `departure`, or a verdict that names it lost).
void lose_source(self_ptr self, const rank_ref& gone, const std::string& reason, bool link,
                 spdlog::level::level_enum level, const rank_left* departure = nullptr);

/// A monitored actor went down: the decider, or a prefill source.
void on_down(self_ptr self, const caf::down_msg& dm);

/// After a verdict: a prefill rank it names lost (or the contact with the
/// room's instance it says was cut) makes this rank look the instance up again.
void forget_after_verdict(self_ptr self, const decode_room& room, const failure& why);

}  // namespace kvferry::decode_steps
