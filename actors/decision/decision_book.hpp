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
    std::set<rank_ref> prefill;  ///< prefill participants named so far
    std::chrono::steady_clock::time_point opened{};  ///< when the first join came
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
  /// is the time of the join.
  room& join(uint64_t id, const rank_ref& decode_rank, const std::vector<rank_ref>& prefill,
             std::chrono::steady_clock::time_point now = {});

  /// The room of `key`: same id, and same generation unless key's is 0.
  room* find(const room_key& key);

  /// A participant finished; the verdict when this completes the room.
  std::optional<verdict> finish(room& r, const rank_ref& who);

  /// A failure was reported; the verdict if it is the first word on the room.
  std::optional<verdict> fail(room& r, failure why);

  /// A decode rank released the room. True when it was the last joined one
  /// (the room is forgotten).
  bool leave(const room_key& key, const rank_ref& who);

  /// Keys of the rooms `who` has joined.
  std::vector<room_key> rooms_of(const rank_ref& who) const;

  /// Keys of the rooms with no verdict yet.
  std::vector<room_key> undecided() const;

  /// Every room on record, decided or not.
  const std::map<uint64_t, room>& rooms() const { return rooms_; }

  size_t size() const { return rooms_.size(); }

 private:
  /// Decode ranks are named by (tp, pp) whatever generation they carry.
  rank_ref canonical(const rank_ref& r) const;

  std::string instance_;
  uint64_t instance_generation_;
  uint32_t tp_size_;
  uint32_t pp_size_;
  uint64_t next_generation_;
  std::map<uint64_t, room> rooms_;
};

}  // namespace kvferry
