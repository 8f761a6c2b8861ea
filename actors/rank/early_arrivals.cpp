#include "actors/rank/early_arrivals.hpp"

#include <string>

#include "actors/common/durations.hpp"

namespace kvferry {

early_arrivals::kept early_arrivals::keep_request(const room_request& req) {
  if (waiting_.size() >= max_waiting_ && !waiting_.count(req.key.room))
    return kept::full;
  auto& entry = waiting_[req.key.room];
  if (entry.request.key.generation != req.key.generation)
    entry = waiting{};  // a new incarnation replaces the old
  if (entry.verdict)
    return kept::decided;  // the open will conclude with it
  for (auto& r : entry.requests)
    if (r.decode_rank == req.decode_rank) {
      r = req;  // the rank asks again: its latest word counts
      entry.request = req;
      return kept::another;
    }
  if (entry.requests.size() >= max_requests_per_room_)
    return kept::crowded;
  entry.request = req;
  entry.requests.push_back(req);
  return entry.requests.size() == 1 ? kept::first : kept::another;
}

bool early_arrivals::keep_verdict(const room_verdict& v, const decider_actor& decider) {
  if (waiting_.size() >= max_waiting_ && !waiting_.count(v.key.room))
    return false;
  auto& entry = waiting_[v.key.room];
  if (entry.request.key.generation != 0 && entry.request.key.generation != v.key.generation)
    return false;
  entry.request.key = v.key;
  entry.request.decider = decider;
  entry.verdict = v;
  return true;
}

std::optional<early_arrivals::waiting> early_arrivals::take(uint64_t room) {
  expiries_.disarm(room);
  auto i = waiting_.find(room);
  if (i == waiting_.end())
    return std::nullopt;
  auto out = std::move(i->second);
  waiting_.erase(i);
  return out;
}

std::optional<early_arrivals::expiry> early_arrivals::expire(uint64_t room, uint64_t generation,
                                                             std::chrono::nanoseconds waited,
                                                             const rank_ref& me) {
  auto i = waiting_.find(room);
  if (i == waiting_.end() || i->second.request.key.generation != generation)
    return std::nullopt;
  auto& entry = i->second;
  if (entry.verdict) {
    expiry out{false, entry.request, *entry.verdict};
    waiting_.erase(i);  // kept long enough for a late open
    return out;
  }
  failure why{errc::deadline,
              to_string(entry.request.key) +
                  " was requested but not opened by the prefill scheduler within " +
                  format_duration(waited),
              me};
  entry.verdict = room_verdict{entry.request.key, kv_poll::failed, std::move(why)};
  return expiry{true, entry.request, *entry.verdict};
}

void early_arrivals::bury(uint64_t room, room_verdict outcome) {
  cleared_.bury(room, std::move(outcome));
}

const room_verdict* early_arrivals::cleared(uint64_t room) const {
  return cleared_.newest(room);
}

const room_verdict* early_arrivals::cleared_as(const room_key& key) const {
  if (key.generation == 0)
    return nullptr;
  return cleared_.find(key.room, [&](const room_verdict& v) { return v.key == key; });
}

room_verdict cleared_outcome(const room_key& key, kv_poll state, const failure& why,
                             const rank_ref& me) {
  if (is_terminal(state))
    return room_verdict{key, state, why};
  return room_verdict{
      key, kv_poll::failed,
      failure{errc::aborted,
              to_string(key) + " was cleared by the prefill scheduler in " + to_string(state), me}};
}

}  // namespace kvferry
