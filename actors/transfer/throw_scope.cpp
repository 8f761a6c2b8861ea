#include "actors/transfer/throw_scope.hpp"

namespace kvferry {

bool stranded(const job_book& book, const staged_queue& queue, uint64_t id, const transfer_job& j) {
  if (j.pending > 0)
    return false;
  if (j.aux_waiting)
    return !book.kv_in_flight(j.meta.key, j.meta.peer);
  return j.posted || !queue.contains(j.meta.peer, id);
}

std::set<room_key> rooms_hit_by_throw(const job_book& book, const staged_queue& queue,
                                      std::optional<uint64_t> job, uint64_t first_cookie) {
  std::set<room_key> rooms;
  if (job)
    if (auto j = book.jobs().find(*job); j != book.jobs().end())
      rooms.insert(j->second.meta.key);
  for (auto& [id, j] : book.jobs())
    if (stranded(book, queue, id, j))
      rooms.insert(j.meta.key);
  rooms.merge(book.rooms_posted_since(first_cookie));
  return rooms;
}

}  // namespace kvferry
