// One room on a decode rank, which is also the room's decider: its destination
// pages, the prefill ranks that write into it, and the group decision that
// turns their finishes (or the first failure) into the verdict. Plain logic;
// the decode rank actor routes messages to it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "actors/rank/group_decision.hpp"
#include "actors/rank/room_fsm.hpp"
#include "messages/failure.hpp"
#include "messages/layout.hpp"
#include "messages/poll_snapshot.hpp"
#include "messages/room.hpp"

namespace kvferry {

class decode_room {
 public:
  /// `local` is this rank's layout and must outlive the room. `peer` names the
  /// prefill instance (its bootstrap locator key).
  decode_room(room_key key, room_slot_ptr slot, std::string peer, const rank_ref& self,
              const kv_layout& local, const deadlines& limits);

  const room_key& key() const { return key_; }
  const std::string& peer() const { return peer_; }
  room_fsm& fsm() { return fsm_; }
  const room_fsm& fsm() const { return fsm_; }
  const room_slot_ptr& slot() const { return slot_; }
  group_decision& decision() { return decision_; }

  /// The scheduler's init: destination pages (one per prefill page, in order)
  /// and the aux row. Pages must be distinct and inside the pool.
  std::optional<failure> init(std::vector<uint32_t> dst_pages, uint32_t aux_slot);
  bool initialized() const { return initialized_; }
  const std::vector<uint32_t>& dst_pages() const { return dst_pages_; }
  uint32_t aux_slot() const { return aux_slot_; }

  /// The prefill ranks that write into this room; they and this rank are the
  /// participants of the decision.
  void set_sources(std::vector<rank_ref> sources);
  const std::vector<rank_ref>& sources() const { return sources_; }
  bool has_sources() const { return !sources_.empty(); }

  /// True once the request went to the sources.
  bool requested() const { return requested_; }
  void mark_requested() { requested_ = true; }

  /// A chunk from `from` landed. Returns a failure if `from` is not a source
  /// of this room or sends after its last chunk; records progress otherwise.
  std::optional<failure> landed(const chunk_landed& msg);

  /// True when every source has landed its last chunk.
  bool all_sources_done() const;

  uint64_t bytes_landed() const { return bytes_; }

  /// True once the verdict went to the prefill ranks (false while they are
  /// not known yet: it goes when the handshake completes).
  bool verdict_sent() const { return verdict_sent_; }
  void mark_verdict_sent() { verdict_sent_ = true; }

 private:
  failure make(errc code, std::string cause) const {
    return failure{code, std::move(cause), self_};
  }

  room_key key_;
  room_slot_ptr slot_;
  std::string peer_;
  rank_ref self_;
  const kv_layout& local_;
  room_fsm fsm_;
  group_decision decision_;
  bool initialized_ = false;
  std::vector<uint32_t> dst_pages_;
  uint32_t aux_slot_ = no_aux_slot;
  std::vector<rank_ref> sources_;
  std::vector<rank_ref> done_;
  bool requested_ = false;
  uint64_t bytes_ = 0;
  bool verdict_sent_ = false;
};

}  // namespace kvferry
