#include "actors/transfer/staged_queue.hpp"

#include <algorithm>

namespace kvferry {

void staged_queue::push(const rank_ref& peer, uint64_t id, const room_key& room) {
  queues_[peer].push_back({id, room});
}

bool staged_queue::contains(const rank_ref& peer, uint64_t id) const {
  auto q = queues_.find(peer);
  return q != queues_.end() &&
         std::any_of(q->second.begin(), q->second.end(), [&](auto& e) { return e.id == id; });
}

bool staged_queue::remove(const rank_ref& peer, uint64_t id) {
  auto q = queues_.find(peer);
  if (q == queues_.end())
    return false;
  auto& jobs = q->second;
  auto at = std::find_if(jobs.begin(), jobs.end(), [&](auto& e) { return e.id == id; });
  if (at == jobs.end())
    return false;
  jobs.erase(at);
  return true;
}

std::vector<uint64_t> staged_queue::cut(const rank_ref& peer, uint64_t id) {
  std::vector<uint64_t> out{id};
  auto q = queues_.find(peer);
  if (q == queues_.end())
    return out;
  auto& jobs = q->second;
  auto at = std::find_if(jobs.begin(), jobs.end(), [&](auto& e) { return e.id == id; });
  if (at == jobs.end())
    return out;
  auto room = at->room;
  for (auto i = std::next(at); i != jobs.end(); ++i)
    if (i->id != id && i->room == room)
      out.push_back(i->id);
  std::erase_if(jobs,
                [&](auto& e) { return std::find(out.begin(), out.end(), e.id) != out.end(); });
  return out;
}

std::vector<uint64_t> staged_queue::waiting(const rank_ref& peer) const {
  std::vector<uint64_t> out;
  if (auto q = queues_.find(peer); q != queues_.end())
    for (auto& e : q->second)
      out.push_back(e.id);
  return out;
}

std::vector<staged_queue::waiting_job> staged_queue::oldest_first() const {
  std::vector<waiting_job> out;
  for (auto& [peer, jobs] : queues_)
    for (auto& e : jobs)
      out.push_back({e.id, peer});
  std::sort(out.begin(), out.end(),
            [](const waiting_job& a, const waiting_job& b) { return a.job < b.job; });
  return out;
}

size_t staged_queue::size() const {
  size_t n = 0;
  for (auto& [peer, jobs] : queues_)
    n += jobs.size();
  return n;
}

}  // namespace kvferry
