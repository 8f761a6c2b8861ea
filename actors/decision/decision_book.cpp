#include "actors/decision/decision_book.hpp"

namespace kvferry {

namespace {

/// Decided rooms remembered after they are forgotten, for members that join
/// or report late: enough for a burst of rooms beyond the decider's admission
/// (kvferry.max-rooms, 4096 by default), at about 200 B each.
constexpr size_t max_tombstones = 16384;

}  // namespace

decision_book::decision_book(std::string instance, uint64_t instance_generation, uint32_t tp_size,
                             uint32_t pp_size, uint64_t first_generation)
    : instance_(std::move(instance)),
      instance_generation_(instance_generation),
      tp_size_(tp_size),
      pp_size_(pp_size),
      next_generation_(first_generation == 0 ? 1 : first_generation),
      tombstones_(max_tombstones) {}

rank_ref decision_book::member(uint32_t tp, uint32_t pp) const {
  return rank_ref{role::decode, instance_, instance_generation_, tp, pp};
}

rank_ref decision_book::canonical(const rank_ref& r) const {
  return r.side == role::decode ? member(r.tp, r.pp) : r;
}

decision_book::room& decision_book::join(uint64_t id, const rank_ref& decode_rank,
                                         const std::vector<rank_ref>& prefill,
                                         std::chrono::steady_clock::time_point now) {
  auto [i, fresh] = rooms_.try_emplace(id);
  auto& r = i->second;
  if (fresh) {
    ++undecided_;
    r.key = room_key{id, next_generation_++};
    r.opened = now;
    for (uint32_t pp = 0; pp < pp_size_; ++pp)
      for (uint32_t tp = 0; tp < tp_size_; ++tp)
        r.decision.add_participant(member(tp, pp));
  }
  r.joined.insert(canonical(decode_rank));
  for (auto& p : prefill)
    if (r.prefill.insert(p).second) {
      r.decision.add_participant(p);
      ++naming_[p];
    }
  return r;
}

decision_book::room* decision_book::find(const room_key& key) {
  auto i = rooms_.find(key.room);
  if (i == rooms_.end() || (key.generation != 0 && key.generation != i->second.key.generation))
    return nullptr;
  return &i->second;
}

std::optional<verdict> decision_book::finish(room& r, const rank_ref& who) {
  auto v = r.decision.finish(canonical(who));
  if (v)
    --undecided_;
  return v;
}

std::optional<verdict> decision_book::fail(room& r, failure why) {
  auto v = r.decision.fail(std::move(why));
  if (v)
    --undecided_;
  return v;
}

bool decision_book::leave(const room_key& key, const rank_ref& who,
                          const std::set<rank_ref>& members) {
  auto* r = find(key);
  if (!r)
    return false;
  auto c = canonical(who);
  r->joined.erase(c);
  r->left.insert(c);
  return forget_if_done(key.room, members);
}

bool decision_book::forget_if_done(uint64_t id, const std::set<rank_ref>& members) {
  auto i = rooms_.find(id);
  if (i == rooms_.end())
    return false;
  auto& r = i->second;
  for (auto& m : members) {
    auto c = canonical(m);
    if (r.left.count(c) || (r.late_excused && !r.joined.count(c)))
      continue;
    return false;
  }
  if (auto& v = r.decision.outcome()) {
    tombstone t{r.key, *v, r.left};
    t.took_part.insert(r.joined.begin(), r.joined.end());
    tombstones_.bury(r.key.room, std::move(t));
  }
  for (auto& p : r.prefill)
    if (auto n = naming_.find(p); n != naming_.end() && --n->second == 0)
      naming_.erase(n);
  if (!r.decision.decided())
    --undecided_;
  rooms_.erase(i);
  expiries_.disarm(id);
  return true;
}

const decision_book::tombstone* decision_book::late_join(uint64_t id, const rank_ref& who) {
  auto* t = tombstones_.newest(id);
  if (!t || t->took_part.count(canonical(who)))
    return nullptr;  // none, or it took part: this is a new room with the same id
  return t;
}

void decision_book::excuse_late(const room_key& key) {
  if (auto* r = find(key))
    r->late_excused = true;
}

std::vector<uint64_t> decision_book::ids() const {
  std::vector<uint64_t> out;
  for (auto& [id, r] : rooms_)
    out.push_back(id);
  return out;
}

std::vector<room_key> decision_book::rooms_of(const rank_ref& who) const {
  std::vector<room_key> out;
  auto c = canonical(who);
  for (auto& [id, r] : rooms_)
    if (r.joined.count(c))
      out.push_back(r.key);
  return out;
}

std::vector<room_key> decision_book::undecided() const {
  std::vector<room_key> out;
  for (auto& [id, r] : rooms_)
    if (!r.decision.decided())
      out.push_back(r.key);
  return out;
}

}  // namespace kvferry
