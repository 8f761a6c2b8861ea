// The decider's record of rooms: who takes part in each (every decode rank of
// the instance, every prefill rank of the instance it reads from), who has
// finished, and the verdict once there is one. Plain logic behind the decider
// actor.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "actors/common/deadline_book.hpp"
#include "actors/common/tombstones.hpp"
#include "actors/decision/group_decision.hpp"
#include "messages/failure.hpp"
#include "messages/ids.hpp"

namespace kvferry {

class decision_book {
 public:
  struct room {
    room_key key;
    group_decision decision;
    std::set<rank_ref> joined;   ///< decode ranks that opened it and did not leave yet
    std::set<rank_ref> left;     ///< decode ranks that released it
    bool late_excused = false;   ///< members that never joined are no longer waited for
    std::set<rank_ref> prefill;  ///< prefill participants named so far
    std::chrono::steady_clock::time_point opened{};  ///< when the first join came
  };

  /// A decided room no longer on record: its verdict, for a member that joins
  /// it late (it had not taken part when the record was forgotten).
  struct tombstone {
    room_key key;
    verdict outcome;
    std::set<rank_ref> took_part;  ///< members that joined or left it before
  };

  /// `first_generation` seeds the room generations (distinct per incarnation).
  decision_book(std::string instance, uint64_t instance_generation, uint32_t tp_size,
                uint32_t pp_size, uint64_t first_generation);

  const std::string& instance() const { return instance_; }
  uint64_t instance_generation() const { return instance_generation_; }
  uint32_t tp_size() const { return tp_size_; }
  uint32_t pp_size() const { return pp_size_; }

  /// The rank_ref of decode member (tp, pp) as this decider names it.
  rank_ref member(uint32_t tp, uint32_t pp) const;

  /// A decode rank opened room `id`: the first join creates the room, draws
  /// its generation and makes every decode rank of the instance a
  /// participant; `prefill` adds prefill participants while undecided. `now`
  /// is the time of the join (the first one's is the room's opening).
  room& join(uint64_t id, const rank_ref& decode_rank, const std::vector<rank_ref>& prefill,
             std::chrono::steady_clock::time_point now = {});

  /// The room of `key`: same id, and same generation unless key's is 0.
  room* find(const room_key& key);

  /// A participant finished; the verdict when this completes the room.
  std::optional<verdict> finish(room& r, const rank_ref& who);

  /// A failure was reported; the verdict if it is the first word on the room.
  std::optional<verdict> fail(room& r, failure why);

  /// A decode rank released the room. True when that makes it forgotten
  /// (see forget_if_done()).
  bool leave(const room_key& key, const rank_ref& who, const std::set<rank_ref>& members);

  /// Forgets room `id` once every decode rank in `members` (the live ones)
  /// has released it: a member that has not joined yet will, and must still
  /// find the verdict. True when forgotten.
  bool forget_if_done(uint64_t id, const std::set<rank_ref>& members);

  /// Members that never joined room `key` are no longer waited for.
  void excuse_late(const room_key& key);

  /// Ids of every room on record.
  std::vector<uint64_t> ids() const;

  /// The tombstone of room `id` if member `who` joins it late (it took no
  /// part in it before it was forgotten): it gets that verdict, on every join
  /// it sends. nullptr otherwise (a new room that reuses the id, or none).
  const tombstone* late_join(uint64_t id, const rank_ref& who);

  size_t tombstones() const { return tombstones_.size(); }

  /// True when room `key` (its exact generation) was decided and forgotten:
  /// a late report of it changes nothing and is no stranger's.
  bool decided_before(const room_key& key) {
    auto* t = tombstones_.newest(key.room);
    return t && key.generation != 0 && t->key == key;
  }

  /// Keys of the rooms `who` has joined (and not left).
  std::vector<room_key> rooms_of(const rank_ref& who) const;

  /// Keys of the rooms with no verdict yet.
  std::vector<room_key> undecided() const;

  /// How many rooms have no verdict yet (kept as rooms come and go).
  size_t undecided_count() const { return undecided_; }

  /// Every room on record, decided or not.
  const std::map<uint64_t, room>& rooms() const { return rooms_; }

  size_t size() const { return rooms_.size(); }

  /// How many rooms on record name prefill rank `p` (kept as rooms come and
  /// go, so that asking costs no walk over the rooms).
  size_t rooms_naming(const rank_ref& p) const {
    auto i = naming_.find(p);
    return i == naming_.end() ? 0 : i->second;
  }

  using time_point = std::chrono::steady_clock::time_point;
  using expiry_book = deadline_book<time_point>;

  /// Decided room `key` waits for members that never joined until `at` (one
  /// expiry per room, forgotten with it). When set, the time the actor's
  /// timer must go off.
  std::optional<time_point> arm_expiry(const room_key& key, time_point at) {
    return expiries_.arm(key.room, key.generation, at);
  }
  /// The expiries due at `now` ((room, generation) each), and when the timer
  /// must go off next.
  expiry_book::fired expiries_due(time_point now) { return expiries_.fire(now); }
  /// Rooms with an expiry armed.
  size_t expiries() const { return expiries_.size(); }

 private:
  /// Decode ranks are named by (tp, pp) whatever generation they carry.
  rank_ref canonical(const rank_ref& r) const;

  std::string instance_;
  uint64_t instance_generation_;
  uint32_t tp_size_;
  uint32_t pp_size_;
  uint64_t next_generation_;
  std::map<uint64_t, room> rooms_;
  std::map<rank_ref, size_t> naming_;  // prefill rank → rooms on record naming it
  size_t undecided_ = 0;               // rooms on record with no verdict
  expiry_book expiries_;
  kvferry::tombstones<tombstone> tombstones_;
};

}  // namespace kvferry
