// The steps of the decider actor, shared by its two files: the rooms
// (decider_actor.cpp: registrations, joins, finishes, failures, verdicts) and
// its peers (decider_peers.cpp: heartbeat rounds and leases, losing members and
// prefill ranks, reaching prefill processes). Internal to the actor.
#pragma once

#include <set>
#include <string>

#include "actors/decision/decider_actor.hpp"
#include "actors/guard.hpp"

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

}  // namespace kvferry::decider_steps
