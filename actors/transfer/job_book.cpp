#include "actors/transfer/job_book.hpp"

namespace kvferry {

chunk_result transfer_job::result() const {
  chunk_result r;
  r.key = meta.key;
  r.peer = meta.peer;
  r.chunk = meta.chunk;
  r.last = meta.last;
  r.pages = static_cast<uint32_t>(meta.src_pages.size());
  r.bytes = bytes;
  r.writes = writes;
  r.staged = staged;
  r.first_page = meta.first_page;
  r.why = why;
  r.digests = digests;
  return r;
}

transfer_job* job_book::find(uint64_t id) {
  auto i = jobs_.find(id);
  return i == jobs_.end() ? nullptr : &i->second;
}

uint64_t job_book::add_batch(uint64_t id, uint64_t bytes, uint32_t writes, bool aux) {
  auto& j = jobs_.at(id);
  auto cookie = draw();
  j.bytes += bytes;
  j.writes += writes;
  ++j.pending;
  batches_.emplace(cookie, batch{id, aux});
  if (!aux)
    ++kv_in_flight_[{j.meta.key, j.meta.peer}];
  return cookie;
}

bool job_book::kv_done(const room_peer& rp) {
  // Counted down through operator[] as the actor always did: a count that is
  // not there wraps rather than throws.
  if (--kv_in_flight_[rp] != 0)
    return false;
  kv_in_flight_.erase(rp);
  return true;
}

void job_book::refused(uint64_t cookie) {
  auto b = batches_.find(cookie);
  if (b == batches_.end())
    return;
  auto [id, aux] = b->second;
  batches_.erase(b);
  auto& j = jobs_.at(id);
  --j.pending;
  if (!aux)
    kv_done({j.meta.key, j.meta.peer});
}

std::optional<job_book::completion> job_book::complete(uint64_t cookie) {
  auto b = batches_.find(cookie);
  if (b == batches_.end())
    return std::nullopt;
  auto [id, aux] = b->second;
  batches_.erase(b);
  auto& j = jobs_.at(id);
  --j.pending;
  completion c{id, aux, false};
  if (!aux)
    c.kv_landed = kv_done({j.meta.key, j.meta.peer});
  return c;
}

std::optional<uint64_t> job_book::job_of(uint64_t cookie) const {
  auto b = batches_.find(cookie);
  if (b == batches_.end())
    return std::nullopt;
  return b->second.job;
}

void job_book::abandon(uint64_t id) {
  auto j = jobs_.find(id);
  if (j == jobs_.end())
    return;
  room_peer rp{j->second.meta.key, j->second.meta.peer};
  for (auto b = batches_.begin(); b != batches_.end();) {
    if (b->second.job != id) {
      ++b;
      continue;
    }
    if (!b->second.aux)
      kv_done(rp);
    b = batches_.erase(b);
  }
  jobs_.erase(j);
}

std::set<room_key> job_book::rooms_posted_since(uint64_t first) const {
  std::set<room_key> rooms;
  for (auto b = batches_.lower_bound(first); b != batches_.end(); ++b)
    if (auto j = jobs_.find(b->second.job); j != jobs_.end())
      rooms.insert(j->second.meta.key);
  return rooms;
}

std::vector<uint64_t> job_book::jobs_of(const std::set<room_key>& rooms) const {
  std::vector<uint64_t> out;
  for (auto& [id, j] : jobs_)
    if (rooms.count(j.meta.key))
      out.push_back(id);
  return out;
}

void job_book::forget_kv(const std::set<room_key>& rooms) {
  std::erase_if(kv_in_flight_, [&](const auto& kv) { return rooms.count(kv.first.first) > 0; });
}

}  // namespace kvferry
