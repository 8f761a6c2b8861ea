// The steps of the transfer actor, shared by its three files and used by no
// one else: transfer_actor.cpp (the behaviour and the direct path: post,
// complete, finish), transfer_staged.cpp (the staged path: ask, wait for the
// ring, gather, bulk write) and transfer_shield.cpp (what a throw in a handler
// fails). The logic they call is in plain classes: job_book, staged_queue,
// staged_pass, gather_space, throw_scope.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "actors/plan/planner.hpp"
#include "actors/transfer/transfer_actor.hpp"

namespace kvferry::transfer_steps {

using self_ptr = transfer_actor::stateful_pointer<transfer_state>;

// -- the direct path (transfer_actor.cpp) -------------------------------------

/// Sends the result of job `id` (it must be done) and forgets it.
void finish(self_ptr self, uint64_t id);

/// Posts a job's KV plan and, on a last chunk, the states and aux row after
/// it. The job may be finished (and gone) when it returns.
void launch(self_ptr self, uint64_t id, write_plan plan);

/// Forgets a job that threw half way: its batches, its gather space, its
/// place in the staged queue and the KV it counted in flight.
void abandon(self_ptr self, uint64_t id);

// -- the staged path (transfer_staged.cpp) ------------------------------------

/// Asks the peer's staging actor for ring space for staged job `id`.
void start_staged(self_ptr self, uint64_t id);

/// Posts the staged jobs that may go now (staged_pass's rule).
void pump_all(self_ptr self);

/// Fails every job still waiting for `rank`'s ring with `why`, and forgets
/// that ring's queue.
void drop_waiting(self_ptr self, const rank_ref& rank, const failure& why);

/// The ring of a peer was consumed further.
void on_watermark(self_ptr self, const staging_watermark& wm);

/// Staged job `id` waited its slot_wait: it fails unless its write went.
void on_slot_timeout(self_ptr self, uint64_t id);

// -- what a throw fails (transfer_shield.cpp) ---------------------------------

/// Notes what the handler about to run handles (job `job`, if it works on
/// one): a throw in it fails the rooms that concerns (rooms_hit_by_throw).
void handles(self_ptr self, const char* what, std::optional<uint64_t> job);

/// A handler threw `what`: the rooms it concerns fail at once, each of their
/// jobs with the chunk_result a failed write sends; the actor carries on.
failure on_exception(self_ptr self, const std::string& what);

}  // namespace kvferry::transfer_steps
