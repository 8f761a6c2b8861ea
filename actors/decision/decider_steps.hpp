// The steps of the decider actor, shared by its three files: the rooms
// (decider_actor.cpp: registrations, joins, finishes, failures, verdicts), its
// peers (decider_peers.cpp: heartbeat rounds and leases, losing members and
// prefill ranks, reaching prefill processes) and who may send it what
// (decider_senders.cpp). Internal to the actor.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "actors/base/guard.hpp"
#include "actors/decision/decider_actor.hpp"

namespace kvferry::decider_steps {

using self_ptr = decider_actor::stateful_pointer<decider_state>;

// -- the rooms (decider_actor.cpp) ----------------------------------------------

/// "[decider decode-0]": how the decider names itself in its logs.
std::string who(self_ptr self);

/// An exception escaped a handler: every undecided room fails with it.
failure on_exception(self_ptr self, const std::string& what);

/// Sends the verdict to every decode rank that joined the room and every
/// prefill participant.
void broadcast(self_ptr self, const decision_book::room& r, const verdict& v);

/// The decode ranks registered now, as the book names them.
std::set<rank_ref> live_members(self_ptr self);

/// Drops the handles of prefill ranks that no room on record names any more.
void forget_unnamed_prefill(self_ptr self);

// -- its peers (decider_peers.cpp) -----------------------------------------------

/// True (and the room failed with that cause) if a participant of undecided
/// room `r` may already have declared this decider lost (see the definition).
bool lapsed(self_ptr self, decision_book::room& r);

/// Schedules the next heartbeat round unless one is.
void arm_heartbeat(self_ptr self);

/// Pings every member, and every prefill participant of an undecided room.
void heartbeat_round(self_ptr self);

/// A monitored actor went down: a member or a prefill participant.
void on_down(self_ptr self, const caf::down_msg& dm);

/// A member's process died (its life token): it is lost as by its down_msg.
void on_life_ended(self_ptr self, const life_ended& e);

/// Connects to the process of each prefill rank asked for, each once.
caf::result<reach_peers> reach(self_ptr self, reach_peers& ask);

// -- who may send what (decider_senders.cpp) --------------------------------------

/// True when the message being handled comes from the registered decode rank
/// at `rank`'s place; else it is dropped (what: the message, for the log).
bool from_member(self_ptr self, const rank_ref& rank, std::string_view what);

/// True when the current sender is a registered member or a prefill rank a
/// join named (`rank`, when given, must be the sender's own place or name).
bool known_participant(self_ptr self, const rank_ref* rank = nullptr);

/// known_participant(), or the message is dropped and counted.
bool from_participant(self_ptr self, const rank_ref* rank, std::string_view what);

/// Holds failure `f` of a live room from the current sender, no participant
/// yet, until a join names it (at most 256, the oldest dropped first).
void hold_failure(self_ptr self, const room_failure& f);

/// The failure of room `key` that `sender` reported before a join named it,
/// if one is held (it is no longer).
std::optional<failure> take_held_failure(self_ptr self, const caf::actor_addr& sender,
                                         const room_key& key);

}  // namespace kvferry::decider_steps
