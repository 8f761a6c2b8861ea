// What a prefill rank keeps about rooms its scheduler has not opened: decode
// ranks' requests (and verdicts) that came first, until the room opens or
// they expire, and the outcomes of cleared rooms for messages that come late.
// Plain logic, bounded on both sides. The expiries are kept here, one per room
// waiting, gone when it opens; the actor keeps one timer over them and sends.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "actors/common/deadline_book.hpp"
#include "actors/common/tombstones.hpp"
#include "messages/failure.hpp"
#include "messages/room.hpp"

namespace kvferry {

class early_arrivals {
 public:
  /// Requests and a verdict for one room not opened yet.
  struct waiting {
    room_request request;                ///< the latest: its key and decider
    std::vector<room_request> requests;  ///< every decode rank's, in arrival order
    std::optional<room_verdict> verdict;
  };

  /// What became of a request kept for later.
  enum class kept {
    full,     ///< refused: too many rooms wait already
    crowded,  ///< refused: too many decode ranks' requests wait for this room
    decided,  ///< not needed: the room's verdict came first
    first,    ///< the room's first: its expiry is to be armed
    another,  ///< one more for a room already waiting
  };

  /// A waiting room whose time ran out.
  struct expiry {
    /// True: nobody was told yet; `request.decider` is to hear `verdict.why`.
    /// False: it was decided already, and is forgotten now.
    bool failed = false;
    room_request request;
    room_verdict verdict;
  };

  using time_point = std::chrono::steady_clock::time_point;
  using expiry_book = deadline_book<time_point>;

  /// Requests kept per room at most: one per decode rank, for a topology of
  /// 4,096 ranks.
  static constexpr size_t default_max_requests_per_room = 4096;

  explicit early_arrivals(size_t max_waiting = 65536, size_t max_cleared = 4096,
                          size_t max_requests_per_room = default_max_requests_per_room)
      : max_waiting_(max_waiting),
        max_requests_per_room_(max_requests_per_room),
        cleared_(max_cleared) {}

  size_t max_waiting() const { return max_waiting_; }
  size_t max_requests_per_room() const { return max_requests_per_room_; }

  /// Keeps `req` for room `req.key.room` until it opens. A request of
  /// another generation replaces what was kept for the room, and a decode
  /// rank's request replaces that rank's earlier one: a room keeps one per
  /// decode rank, at most max_requests_per_room().
  kept keep_request(const room_request& req);

  /// Keeps the verdict `v` (sent by `decider`) for a room not opened yet,
  /// unless another generation of the room is waiting. True if kept: its
  /// expiry is to be armed.
  bool keep_verdict(const room_verdict& v, const decider_actor& decider);

  /// The room opened: what waited for it, which is forgotten here.
  std::optional<waiting> take(uint64_t room);

  /// The expiry of room `room`'s `generation` fired after `waited`. Nothing
  /// if that room's generation no longer waits. A room not decided yet fails
  /// (deadline, origin `me`) and is kept as decided a while longer, so that a
  /// late open concludes with the same cause.
  std::optional<expiry> expire(uint64_t room, uint64_t generation, std::chrono::nanoseconds waited,
                               const rank_ref& me);

  size_t waiting_rooms() const { return waiting_.size(); }

  /// Room `room`'s wait (generation `generation`) runs out at `at`, replacing
  /// the expiry it had. When set, the time the actor's timer must go off.
  std::optional<time_point> arm_expiry(uint64_t room, uint64_t generation, time_point at) {
    return expiries_.arm(room, generation, at);
  }
  /// True while room `room` has an expiry armed.
  bool expiry_armed(uint64_t room) const { return expiries_.of(room).has_value(); }
  /// The expiries due at `now` ((room, generation), each to expire()), and
  /// when the timer must go off next.
  expiry_book::fired expiries_due(time_point now) { return expiries_.fire(now); }
  /// Rooms with an expiry armed.
  size_t expiries() const { return expiries_.size(); }

  /// Remembers the outcome of cleared room `room` (the oldest is forgotten
  /// beyond the bound).
  void bury(uint64_t room, room_verdict outcome);

  /// The outcome of the latest cleared room with id `room`.
  const room_verdict* cleared(uint64_t room) const;

  /// The outcome of the cleared room of exactly `key`, if it was bound to a
  /// generation: a message with that key, for a room opened again with the
  /// same id and not bound yet, is of the older room.
  const room_verdict* cleared_as(const room_key& key) const;

  size_t cleared_rooms() const { return cleared_.size(); }

 private:
  size_t max_waiting_;
  size_t max_requests_per_room_;
  std::map<uint64_t, waiting> waiting_;
  expiry_book expiries_;
  tombstones<room_verdict> cleared_;
};

/// The outcome a room cleared by its scheduler in `state` leaves behind: its
/// own if concluded, otherwise Failed (aborted, origin `me`).
room_verdict cleared_outcome(const room_key& key, kv_poll state, const failure& why,
                             const rank_ref& me);

}  // namespace kvferry
