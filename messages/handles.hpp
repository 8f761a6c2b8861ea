// The typed interfaces of kvferry's actors, and the atoms they use. An actor
// holds another's handle without including its implementation, and a message
// the interface does not list fails to compile.
#pragma once

#include <cstdint>
#include <string>

#include <caf/atom.hpp>
#include <caf/replies_to.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "messages/poll_snapshot.hpp"

namespace kvferry {

// -- atoms (at most 10 characters) --------------------------------------------

using room_open_atom = caf::atom_constant<caf::atom("room_open")>;
using room_abort_atom = caf::atom_constant<caf::atom("room_abort")>;
using room_clear_atom = caf::atom_constant<caf::atom("room_clear")>;
using room_poll_atom = caf::atom_constant<caf::atom("room_poll")>;
using deadline_atom = caf::atom_constant<caf::atom("deadline")>;
using retry_atom = caf::atom_constant<caf::atom("retry")>;
using topology_atom = caf::atom_constant<caf::atom("topology")>;
using register_atom = caf::atom_constant<caf::atom("register")>;
using expire_atom = caf::atom_constant<caf::atom("expire")>;
using quiesce_atom = caf::atom_constant<caf::atom("quiesce")>;
using heartbeat_atom = caf::atom_constant<caf::atom("heartbeat")>;
using beat_atom = caf::atom_constant<caf::atom("beat")>;

constexpr room_open_atom room_open_atom_v{};
constexpr room_abort_atom room_abort_atom_v{};
constexpr room_clear_atom room_clear_atom_v{};
constexpr room_poll_atom room_poll_atom_v{};
constexpr deadline_atom deadline_atom_v{};
constexpr retry_atom retry_atom_v{};
constexpr topology_atom topology_atom_v{};
constexpr register_atom register_atom_v{};
constexpr expire_atom expire_atom_v{};
constexpr quiesce_atom quiesce_atom_v{};
constexpr heartbeat_atom heartbeat_atom_v{};
constexpr beat_atom beat_atom_v{};

// -- message types (defined in bootstrap.hpp, room.hpp, scheduler.hpp, transfer.hpp)

struct bootstrap_locator;
struct rank_registration;
struct registration_ack;
struct topology;
struct rank_left;
struct dest_registration;
struct dest_accepted;
struct room_request;
struct chunk_landed;
struct room_failure;
struct room_verdict;
struct sender_init;
struct chunk_send;
struct receiver_init;
struct room_status;
struct peer_connect;
struct chunk_job;
struct chunk_result;
struct batch_done;
struct member_registration;
struct member_ack;
struct room_join;
struct room_keyed;
struct room_finished;
struct room_leave;

// -- interfaces ---------------------------------------------------------------

/// The directory of one prefill instance, published on its bootstrap port.
using bootstrap_actor = caf::typed_actor<
    // A prefill rank joins; the reply carries the instance generation.
    caf::replies_to<rank_registration>::with<registration_ack>,
    // A decode rank asks who serves the instance.
    caf::replies_to<topology_atom>::with<topology>>;

/// A decode rank, as its scheduler, its prefill peers and its decider see it.
using decode_rank_actor = caf::typed_actor<
    // scheduler: open (room, where its prefill instance is, published slot)
    caf::reacts_to<room_open_atom, uint64_t, bootstrap_locator, room_slot_ptr>,
    caf::reacts_to<receiver_init>, caf::reacts_to<room_abort_atom, uint64_t>,
    caf::reacts_to<room_clear_atom, uint64_t>,
    caf::replies_to<room_poll_atom, uint64_t>::with<room_status>,
    // prefill ranks, and their bootstrap when one of them leaves
    caf::reacts_to<chunk_landed>, caf::reacts_to<rank_left>,
    // the decider
    caf::reacts_to<room_keyed>, caf::reacts_to<room_verdict>,
    // the decider's pings
    caf::replies_to<heartbeat_atom, uint64_t>::with<heartbeat_atom, uint64_t>,
    // own timers: (room, epoch) deadlines, topology retries (peer key),
    // decider registration retries, fences still waiting to close, the
    // check for a silent decider
    caf::reacts_to<deadline_atom, uint64_t, uint64_t>, caf::reacts_to<retry_atom, std::string>,
    caf::reacts_to<register_atom>, caf::reacts_to<quiesce_atom>, caf::reacts_to<beat_atom>>;

/// The decider of a decode instance: one verdict per room for every rank of
/// both instances that takes part in it.
using decider_actor = caf::typed_actor<
    // decode ranks of the instance join
    caf::replies_to<member_registration>::with<member_ack>,
    // participants
    caf::reacts_to<room_join>, caf::reacts_to<room_finished>, caf::reacts_to<room_failure>,
    caf::reacts_to<room_leave>,
    // own timers: the heartbeat round, (room, generation) expiry of a decided
    // room that some member never joined
    caf::reacts_to<beat_atom>, caf::reacts_to<expire_atom, uint64_t, uint64_t>>;

/// A prefill rank, as its scheduler, its decode peers and its transfer actor see it.
using prefill_rank_actor = caf::typed_actor<
    // scheduler
    caf::reacts_to<room_open_atom, uint64_t, room_slot_ptr>, caf::reacts_to<sender_init>,
    caf::reacts_to<chunk_send>, caf::reacts_to<room_abort_atom, uint64_t>,
    caf::reacts_to<room_clear_atom, uint64_t>,
    caf::replies_to<room_poll_atom, uint64_t>::with<room_status>,
    // decode ranks
    caf::replies_to<dest_registration>::with<dest_accepted>, caf::reacts_to<room_request>,
    // deciders: verdicts and pings
    caf::reacts_to<room_verdict>,
    caf::replies_to<heartbeat_atom, uint64_t>::with<heartbeat_atom, uint64_t>,
    // own transfer actor
    caf::reacts_to<chunk_result>,
    // own timers: (room, epoch) deadlines, (room, generation) expiry of requests
    // for rooms not open yet, registration retries, the check for silent deciders
    caf::reacts_to<deadline_atom, uint64_t, uint64_t>,
    caf::reacts_to<expire_atom, uint64_t, uint64_t>, caf::reacts_to<register_atom>,
    caf::reacts_to<beat_atom>>;

/// Turns chunks into coalesced transport writes for one prefill rank.
using transfer_actor = caf::typed_actor<caf::reacts_to<peer_connect>, caf::reacts_to<chunk_job>,
                                        // completions of the transport, delivered as messages
                                        caf::reacts_to<batch_done>>;

}  // namespace kvferry

// The interfaces are usable (spawn, send, request) only with every message
// type complete: include their definitions here, after the aliases they use.
#include "messages/bootstrap.hpp"
#include "messages/decision.hpp"
#include "messages/room.hpp"
#include "messages/scheduler.hpp"
#include "messages/transfer.hpp"
