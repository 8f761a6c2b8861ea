// The typed interfaces of kvferry's actors, and the atoms they use. An actor
// holds another's handle without including its implementation, and a message
// the interface does not list fails to compile.
#pragma once

#include <cstdint>
#include <string>

#include <caf/actor_control_block.hpp>
#include <caf/atom.hpp>
#include <caf/replies_to.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "messages/poll_snapshot.hpp"
#include "messages/room_trace.hpp"

namespace kvferry {

// -- atoms (at most 10 characters) --------------------------------------------

using room_open_atom = caf::atom_constant<caf::atom("room_open")>;
using room_abort_atom = caf::atom_constant<caf::atom("room_abort")>;
using room_clear_atom = caf::atom_constant<caf::atom("room_clear")>;
using room_poll_atom = caf::atom_constant<caf::atom("room_poll")>;
/// Timer: a rank's earliest room deadline is due (actors/common/deadline_book.hpp).
using deadline_atom = caf::atom_constant<caf::atom("deadline")>;
using retry_atom = caf::atom_constant<caf::atom("retry")>;
using topology_atom = caf::atom_constant<caf::atom("topology")>;
using register_atom = caf::atom_constant<caf::atom("register")>;
/// Timer: the earliest wait for a room ran out (a decider's decided rooms, a
/// prefill rank's early arrivals), one timer over a deadline_book.
using expire_atom = caf::atom_constant<caf::atom("expire")>;
/// Timer: a decode rank checks whether its draining fences are quiet.
using quiesce_atom = caf::atom_constant<caf::atom("quiesce")>;
/// The decider's ping of a rank (answered with the same sequence number).
using heartbeat_atom = caf::atom_constant<caf::atom("heartbeat")>;
/// Timer: a heartbeat period went by (the decider pings, a rank checks
/// that its decider still pings it).
using heartbeat_tick_atom = caf::atom_constant<caf::atom("hb_tick")>;
/// Timer: a staging actor refuses the asks parked longer than their wait.
using sweep_atom = caf::atom_constant<caf::atom("sweep")>;
/// Timer: a staged job's wait for its place in the peer's ring ran out.
using slot_timeout_atom = caf::atom_constant<caf::atom("slot_wait")>;
/// The DP groups of a prefill instance behind one bootstrap (DP attention).
using dp_group_atom = caf::atom_constant<caf::atom("dp_group")>;
/// How a prefill instance's rooms find their DP group (DP attention).
using dp_route_atom = caf::atom_constant<caf::atom("dp_route")>;

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
constexpr heartbeat_tick_atom heartbeat_tick_atom_v{};
constexpr sweep_atom sweep_atom_v{};
constexpr slot_timeout_atom slot_timeout_atom_v{};
constexpr dp_group_atom dp_group_atom_v{};
constexpr dp_route_atom dp_route_atom_v{};

// -- message types (defined in bootstrap.hpp, room.hpp, scheduler.hpp, transfer.hpp)

struct bootstrap_locator;
struct rank_registration;
struct registration_ack;
struct topology;
struct rank_left;
struct room_dp_query;
struct room_dp_groups;
struct dest_registration;
struct dest_accepted;
struct room_request;
struct chunk_landed;
struct room_failure;
struct sibling_concluded;
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
struct reach_peers;
struct staging_ask;
struct staging_grant;
struct staging_watermark;
struct staging_room;
struct staging_close;
struct chunk_scattered;
struct life_ended;  // in-process only (messages/life.hpp)

// -- interfaces ---------------------------------------------------------------

/// The directory of one prefill instance, published on its bootstrap port.
using bootstrap_actor = caf::typed_actor<
    // A prefill rank joins; the reply carries the instance generation.
    caf::replies_to<rank_registration>::with<registration_ack>,
    // A decode rank asks who serves the instance.
    caf::replies_to<topology_atom>::with<topology>,
    // DP attention: the bootstrap of DP group g of an instance of N groups
    // (N = 0: the asker does not know), made on first ask; a bootstrap_actor.
    caf::replies_to<dp_group_atom, uint32_t, uint32_t>::with<caf::strong_actor_ptr>,
    // How many DP groups the instance has (1: a plain instance; 0: no rank yet).
    caf::replies_to<dp_group_atom>::with<uint32_t>,
    // DP routing: a prefill rank says whether its rooms follow
    // bootstrap_room % dp_size (true) or are registered one by one (false);
    // the answer is the routing in force. A decode rank asks it (true until
    // a prefill rank says otherwise).
    caf::replies_to<dp_route_atom, bool>::with<bool>, caf::replies_to<dp_route_atom>::with<bool>,
    // A prefill rank registers the DP group serving a room; a decode rank
    // asks for the groups of rooms.
    caf::replies_to<dp_route_atom, uint64_t, uint32_t>::with<bool>,
    caf::replies_to<room_dp_query>::with<room_dp_groups>,
    // Its own watch threads: a registered rank's process died (life token).
    caf::reacts_to<life_ended>>;

/// A decode rank, as its scheduler, its prefill peers and its decider see it.
using decode_rank_actor = caf::typed_actor<
    // scheduler: open (room, where its prefill instance is, published slot)
    caf::reacts_to<room_open_atom, uint64_t, bootstrap_locator, room_slot_ptr>,
    caf::reacts_to<receiver_init>, caf::reacts_to<room_abort_atom, uint64_t>,
    caf::reacts_to<room_clear_atom, uint64_t>,
    caf::replies_to<room_poll_atom, uint64_t>::with<room_status>,
    // prefill ranks, and their bootstrap when one of them leaves (and when
    // the instance is whole again: its topology)
    caf::reacts_to<chunk_landed>, caf::reacts_to<rank_left>, caf::reacts_to<topology>,
    // its staging actor
    caf::reacts_to<chunk_scattered>,
    // the decider
    caf::reacts_to<room_keyed>, caf::reacts_to<room_verdict>,
    // the decider's pings
    caf::replies_to<heartbeat_atom, uint64_t>::with<heartbeat_atom, uint64_t>,
    // kvferry-ctl trace: its recent events of one room
    caf::replies_to<trace_atom, uint64_t>::with<room_trace>,
    // own timers: (room, epoch) deadlines, topology retries (peer key),
    // decider registration retries, fences still waiting to close, the
    // check for a silent decider
    caf::reacts_to<deadline_atom>, caf::reacts_to<retry_atom, std::string>,
    caf::reacts_to<register_atom>, caf::reacts_to<quiesce_atom>,
    caf::reacts_to<heartbeat_tick_atom>>;

/// The decider of a decode instance: one verdict per room for every rank of
/// both instances that takes part in it.
using decider_actor = caf::typed_actor<
    // decode ranks of the instance join
    caf::replies_to<member_registration>::with<member_ack>,
    // participants
    caf::reacts_to<room_join>, caf::reacts_to<room_finished>, caf::reacts_to<room_failure>,
    caf::reacts_to<room_leave>,
    // decode ranks, at the handshake with a prefill instance: connect to its ranks
    // (the answer: the endpoints it reached)
    caf::replies_to<reach_peers>::with<reach_peers>,
    // own timers: the heartbeat round, the expiry of decided rooms that some
    // member never joined
    caf::reacts_to<heartbeat_tick_atom>, caf::reacts_to<expire_atom>,
    // its own watch threads: a member's process died (life token)
    caf::reacts_to<life_ended>>;

/// A prefill rank, as its scheduler, its decode peers and its transfer actor see it.
using prefill_rank_actor = caf::typed_actor<
    // scheduler
    caf::reacts_to<room_open_atom, uint64_t, room_slot_ptr>, caf::reacts_to<sender_init>,
    caf::reacts_to<chunk_send>, caf::reacts_to<room_abort_atom, uint64_t>,
    caf::reacts_to<room_clear_atom, uint64_t>,
    caf::replies_to<room_poll_atom, uint64_t>::with<room_status>,
    // decode ranks
    caf::replies_to<dest_registration>::with<dest_accepted>, caf::reacts_to<room_request>,
    // its bootstrap: the instance's topology whenever a rank leaves or joins
    caf::reacts_to<topology>,
    // its runtime: where its actor was published (it registers then)
    caf::reacts_to<control_endpoint>,
    // the other ranks of its instance: a room they concluded without a verdict
    caf::reacts_to<sibling_concluded>,
    // deciders: verdicts and pings
    caf::reacts_to<room_verdict>,
    caf::replies_to<heartbeat_atom, uint64_t>::with<heartbeat_atom, uint64_t>,
    // kvferry-ctl trace: its recent events of one room
    caf::replies_to<trace_atom, uint64_t>::with<room_trace>,
    // own transfer actor
    caf::reacts_to<chunk_result>,
    // own timers: room deadlines, the expiry of requests for rooms not open
    // yet, registration retries, the check for silent deciders
    caf::reacts_to<deadline_atom>, caf::reacts_to<expire_atom>, caf::reacts_to<register_atom>,
    caf::reacts_to<heartbeat_tick_atom>>;

/// Turns chunks into coalesced transport writes for one prefill rank.
using transfer_actor =
    caf::typed_actor<caf::reacts_to<peer_connect>, caf::reacts_to<chunk_job>,
                     // completions of the transport, delivered as messages
                     caf::reacts_to<batch_done>,
                     // staging rings of its peers: how far each was consumed; own timer: a
                     // staged job (by id) waited too long for its slot
                     caf::reacts_to<staging_watermark>,
                     caf::reacts_to<slot_timeout_atom, uint64_t>>;

/// The staging ring of a decode rank (heterogeneous TP): space for the
/// prefill writers' bulk writes, and their scatter into the room's pages.
using staging_actor = caf::typed_actor<
    // prefill writers ask for space for a chunk
    caf::replies_to<staging_ask>::with<staging_grant>,
    // its decode rank: rooms open and close, staged chunks that landed
    // (a closed room scatters no more: the reply says so)
    caf::reacts_to<staging_room>, caf::replies_to<staging_close>::with<staging_close>,
    caf::reacts_to<chunk_landed>,
    // own timer: asks for rooms not open here yet that waited too long
    caf::reacts_to<sweep_atom>>;

// -- handles carried in messages -----------------------------------------------

/// A decode rank's staging ring, offered to its prefill sources at
/// registration (a null handle: no staging on this rank). Here, beside the
/// handle it carries, because both room.hpp and transfer.hpp carry it.
struct staging_offer {
  staging_actor handle;
  uint32_t region = 0;  ///< the ring's transport region on the decode rank
  uint64_t size = 0;    ///< bytes of the ring (the whole region)

  bool offered() const { return static_cast<bool>(handle) && size > 0; }

  friend bool operator==(const staging_offer&, const staging_offer&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, staging_offer& x) {
  return f(caf::meta::type_name("kvferry.staging_offer"), x.handle, x.region, x.size);
}

}  // namespace kvferry

// The interfaces are usable (spawn, send, request) only with every message
// type complete: include their definitions here, after the aliases they use.
#include "messages/bootstrap.hpp"
#include "messages/decision.hpp"
#include "messages/room.hpp"
#include "messages/scheduler.hpp"
#include "messages/staging.hpp"
#include "messages/transfer.hpp"
