// Which rooms a throw inside a transfer actor's handler concerns, plain logic
// (no CAF). A handler that threw may have left its work half done: the rooms
// it touched fail at once (transfer_shield.cpp), the others carry on.
#pragma once

#include <cstdint>
#include <optional>
#include <set>

#include "actors/transfer/job_book.hpp"
#include "actors/transfer/staged_queue.hpp"
#include "messages/ids.hpp"

namespace kvferry {

/// True if job `id` can no longer move on its own: nothing of it in flight,
/// nothing it waits for (the room's KV, or its place in `queue`). Between two
/// handlers no job is (it would have finished); after a handler threw, the
/// one it was working on may be.
bool stranded(const job_book& book, const staged_queue& queue, uint64_t id, const transfer_job& j);

/// The rooms a throw concerns: the room of `job` (the job the handler
/// handled, if any), of every job the throw left stranded, and of every job
/// with a batch posted from cookie `first_cookie` on (a post that threw gets
/// no completion).
std::set<room_key> rooms_hit_by_throw(const job_book& book, const staged_queue& queue,
                                      std::optional<uint64_t> job, uint64_t first_cookie);

}  // namespace kvferry
