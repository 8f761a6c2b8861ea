// One room on a prefill rank: the scheduler's side (init, chunks) and the
// decode side's (destination pages), checked against each other, and the
// chunk jobs they produce once both are known. Plain logic; the prefill rank
// actor routes messages to it.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "actors/rank/room_fsm.hpp"
#include "messages/failure.hpp"
#include "messages/layout.hpp"
#include "messages/poll_snapshot.hpp"
#include "messages/room.hpp"
#include "messages/transfer.hpp"

namespace kvferry {

/// Where this room's pages go on one decode rank. A dummy destination takes
/// part in the room but gets no writes from this rank; the one with an aux
/// row also gets the state components.
struct room_destination {
  rank_ref decode_rank;
  std::vector<uint32_t> dst_pages;
  uint32_t aux_slot = no_aux_slot;
  std::vector<std::vector<uint32_t>> dst_states;
  bool dummy = false;
  uint32_t jobs_issued = 0;  ///< chunk jobs handed out for this destination
  uint32_t jobs_landed = 0;
  bool last_issued = false;
};

class prefill_room {
 public:
  /// `self` names this rank in failures; `local` is this rank's layout and
  /// must outlive the room.
  prefill_room(uint64_t id, room_slot_ptr slot, const rank_ref& self, const kv_layout& local,
               const deadlines& limits);

  uint64_t id() const { return key_.room; }
  /// The room key; generation 0 until a decode rank's request binds it.
  const room_key& key() const { return key_; }
  room_fsm& fsm() { return fsm_; }
  const room_fsm& fsm() const { return fsm_; }
  const room_slot_ptr& slot() const { return slot_; }

  /// The scheduler's init: the room has `num_pages` pages and aux row `aux_slot`.
  std::optional<failure> init(uint32_t num_pages, uint32_t aux_slot);

  /// The scheduler's next chunk. Checked against init and the chunks before
  /// it; the last one carries the state indices (one list per component).
  std::optional<failure> accept(std::vector<uint32_t> pages, bool last,
                                std::vector<std::vector<uint32_t>> states = {});

  /// A decode rank's destination for this room. `dst_layout` is that rank's
  /// registered layout. `required` is how many destinations the room waits for.
  std::optional<failure> bind(const room_request& req, const kv_layout& dst_layout,
                              uint32_t required);

  /// Takes the generation of the decode side's room before any destination is
  /// bound (a refused first request, a verdict that came first), so that
  /// every message about the room names the same key. Only the first one counts.
  void adopt(uint64_t generation) {
    if (dests_.empty() && key_.generation == 0)
      key_.generation = generation;
  }

  /// True once every required destination is known.
  bool bound() const { return required_ > 0 && dests_.size() == required_; }
  /// The tokens the decode side already holds (prefix reuse), as its
  /// requests said (they must agree).
  uint32_t prefix_tokens() const { return prefix_tokens_; }
  const std::vector<room_destination>& destinations() const { return dests_; }

  /// The chunk jobs that can go now (bound, initialized, not concluded), in
  /// order; the last chunk's jobs carry the aux rows.
  std::vector<chunk_job> take_jobs();

  /// A job of this room for destination `peer` finished. Returns true when,
  /// with it, every chunk up to the last has landed at that destination.
  bool landed(const rank_ref& peer);

  /// True when this rank's part is done: every destination bound, the last
  /// chunk accepted and every write of the room landed (at once for a rank
  /// whose destinations are all dummies).
  bool done() const;

  /// Jobs handed out and not finished yet.
  uint32_t in_flight() const { return in_flight_; }
  /// Pages the scheduler has sent so far.
  uint32_t pages_accepted() const { return pages_accepted_; }
  bool initialized() const { return num_pages_.has_value(); }

  /// The failure this rank reported to the decider (the cause it concludes
  /// with if the verdict never comes).
  void set_reported(failure why) { reported_ = std::move(why); }
  const failure& reported() const { return reported_; }

 private:
  failure make(errc code, std::string cause) const {
    return failure{code, std::move(cause), self_};
  }

  struct queued_chunk {
    uint32_t index;
    uint32_t first_page;  ///< position of pages[0] in the room
    std::vector<uint32_t> pages;
    bool last;
  };

  room_key key_;
  room_slot_ptr slot_;
  rank_ref self_;
  const kv_layout& local_;
  room_fsm fsm_;
  std::optional<uint32_t> num_pages_;
  uint32_t aux_slot_ = no_aux_slot;
  std::vector<std::vector<uint32_t>> states_;
  uint32_t pages_accepted_ = 0;
  bool last_accepted_ = false;
  uint32_t next_chunk_ = 0;
  std::vector<queued_chunk> queue_;
  std::vector<room_destination> dests_;
  uint32_t required_ = 0;
  uint32_t prefix_tokens_ = 0;
  uint32_t in_flight_ = 0;
  uint32_t landed_jobs_ = 0;
  uint32_t jobs_issued_ = 0;
  bool last_issued_ = false;
  failure reported_;
};

}  // namespace kvferry
