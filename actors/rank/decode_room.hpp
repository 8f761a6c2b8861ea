// One room on a decode rank: its destination pages, aux row and state slots,
// the prefill ranks it receives from, and how far each has come. Plain logic;
// the decode rank actor routes messages to it. The verdict is the decider's.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "actors/rank/room_fsm.hpp"
#include "messages/decision.hpp"
#include "messages/failure.hpp"
#include "messages/layout.hpp"
#include "messages/poll_snapshot.hpp"
#include "messages/room.hpp"
#include "messages/staging.hpp"

namespace kvferry {

/// A prefill rank this room receives from.
struct room_source {
  rank_ref rank;
  bool dummy = false;       ///< takes part, writes nothing into this rank
  bool writes_aux = false;  ///< writes the aux row and the states
  std::string endpoint;     ///< its data-plane endpoint (to cut it off)
  kv_layout layout;         ///< its layout, from the topology
  bool staged = false;      ///< its chunks come through this rank's staging ring
};

/// A room request and the source it goes to.
struct addressed_request {
  rank_ref to;
  room_request request;
};

class decode_room {
 public:
  /// `local` is this rank's layout and must outlive the room. `peer` names the
  /// prefill instance (its bootstrap locator key).
  decode_room(uint64_t id, room_slot_ptr slot, std::string peer, const rank_ref& self,
              const kv_layout& local, const deadlines& limits);

  /// The room key; generation 0 until the decider's room_keyed.
  const room_key& key() const { return key_; }
  bool keyed() const { return key_.generation != 0; }
  /// Takes the generation the decider drew (once).
  void set_generation(uint64_t g) {
    if (key_.generation == 0)
      key_.generation = g;
  }
  const std::string& peer() const { return peer_; }
  room_fsm& fsm() { return fsm_; }
  const room_fsm& fsm() const { return fsm_; }
  const room_slot_ptr& slot() const { return slot_; }

  /// The scheduler's init: destination pages (one per prefill page, in order,
  /// distinct, inside the pool), the aux row, the state indices (one list
  /// per state component of the layout) and the tokens this rank already
  /// holds (prefix reuse: the pages start at the page holding that token).
  std::optional<failure> init(std::vector<uint32_t> dst_pages, uint32_t aux_slot,
                              std::vector<std::vector<uint32_t>> states,
                              uint32_t prefix_tokens = 0);
  bool initialized() const { return initialized_; }
  uint32_t prefix_tokens() const { return prefix_tokens_; }
  const std::vector<uint32_t>& dst_pages() const { return dst_pages_; }
  uint32_t aux_slot() const { return aux_slot_; }
  const std::vector<std::vector<uint32_t>>& states() const { return states_; }

  /// The prefill ranks this rank receives from (tp_mapping's sources).
  void set_sources(std::vector<room_source> sources) { sources_ = std::move(sources); }
  const std::vector<room_source>& sources() const { return sources_; }
  bool has_sources() const { return !sources_.empty(); }

  /// True once the decider knows the room's prefill participants.
  bool announced() const { return announced_; }
  /// The decider has been told about the room (at least its id).
  bool joined() const { return joined_; }
  /// A key received: the decider keys every join, in order.
  void key_received() { ++keys_received_; }
  /// True once the decider has keyed the join that named the prefill
  /// participants: from then on a verdict reaches them too, so requests may
  /// go to them.
  bool announcement_keyed() const { return announced_ && keys_received_ >= joins_sent_; }

  // -- the room's sequencing: join, key, request --------------------------------

  /// The join to tell the decider now: the room's id, and the prefill
  /// instance's ranks (`everyone`) once known. Nothing once a join named them.
  std::optional<room_join> next_join(const rank_ref& me, const std::vector<participant>& everyone);
  /// True the first time after a join while the room is live: from then on
  /// the decider owes it a verdict, and must stay heard from.
  bool begin_watch();
  /// True when the requests may go out: the decider keyed the join that
  /// named the prefill participants (every rank asked is one the verdict
  /// reaches).
  bool ready_to_request() const { return keyed() && announcement_keyed(); }
  /// The data-plane endpoints of its writing sources: the only ones its
  /// fence admits.
  std::vector<std::string> writers() const;
  /// True if a writing source stages its chunks.
  bool stages() const;
  /// The room as the staging actor must know it before a staged source asks:
  /// its pages and staged writers (none: it stages nothing).
  staging_room staging_open() const;
  /// The request for each source, in order: pages for writing sources, the
  /// aux row and states for the one that writes them.
  std::vector<addressed_request> requests(const rank_ref& me, const decider_actor& decider) const;

  /// True once the room was opened on the staging actor (some source stages).
  bool staged() const { return staged_; }
  void mark_staged() { staged_ = true; }
  /// Whether chunks from `rank` come through the staging ring.
  bool staged_from(const rank_ref& rank) const {
    for (auto& s : sources_)
      if (s.rank == rank)
        return s.staged;
    return false;
  }

  /// True once the requests went to the sources (and the room's fence is open).
  bool requested() const { return requested_; }
  void mark_requested() { requested_ = true; }

  /// A chunk from `msg.prefill_rank` landed. A failure if that rank is not a
  /// writing source of this room or sends after its last chunk.
  std::optional<failure> landed(const chunk_landed& msg);

  /// End-to-end checksums: hashes what chunk `msg` placed in this rank's
  /// pages (`bases`: page 0 of each KV buffer, host memory) and compares it
  /// with the digests its source sent. A mismatch, missing digests or a
  /// chunk outside the room's pages is a checksum_mismatch (or invalid_chunk)
  /// naming the page, the buffer and this rank.
  std::optional<failure> check_digests(const chunk_landed& msg,
                                       std::span<std::byte* const> bases) const;

  /// True when every writing source has landed its last chunk.
  bool all_sources_done() const;

  /// True once this rank told the decider it finished.
  bool finished() const { return finished_; }
  void mark_finished() { finished_ = true; }

  /// The failure this rank reported to the decider (its cause if the verdict
  /// never comes).
  void set_reported(failure why) { reported_ = std::move(why); }
  const failure& reported() const { return reported_; }

  uint64_t bytes_landed() const { return bytes_; }

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
  bool initialized_ = false;
  std::vector<uint32_t> dst_pages_;
  uint32_t aux_slot_ = no_aux_slot;
  std::vector<std::vector<uint32_t>> states_;
  uint32_t prefix_tokens_ = 0;
  std::vector<room_source> sources_;
  std::vector<rank_ref> done_;
  bool announced_ = false;
  bool joined_ = false;
  uint32_t joins_sent_ = 0;
  uint32_t keys_received_ = 0;
  bool requested_ = false;
  bool staged_ = false;
  bool finished_ = false;
  failure reported_;
  uint64_t bytes_ = 0;
};

}  // namespace kvferry
