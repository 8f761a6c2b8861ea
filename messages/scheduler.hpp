// What a scheduler says to its rank actor: the facade's sender and receiver
// objects send these, and a scheduler that is itself an actor can send them
// directly. Opening a room takes a room_slot_ptr (process-local).
#pragma once

#include <cstdint>
#include <vector>

#include "messages/failure.hpp"
#include "messages/ids.hpp"
#include "messages/kv_poll.hpp"
#include "messages/layout.hpp"
#include "messages/room.hpp"

namespace kvferry {

/// Prefill: the room has `num_pages` pages in all; its aux row is `aux_slot`.
struct sender_init {
  uint64_t room = 0;
  uint32_t num_pages = 0;
  uint32_t aux_slot = no_aux_slot;

  friend bool operator==(const sender_init&, const sender_init&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sender_init& x) {
  return f(caf::meta::type_name("kvferry.sender_init"), x.room, x.num_pages, x.aux_slot);
}

/// Prefill: the next pages of the room are computed (chunked prefill); `last`
/// on the chunk that completes the room, which also carries the aux row and
/// the state components' indices.
struct chunk_send {
  uint64_t room = 0;
  std::vector<uint32_t> pages;
  bool last = false;
  std::vector<std::vector<uint32_t>> states;  ///< last chunk: the state indices, per component

  friend bool operator==(const chunk_send&, const chunk_send&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, chunk_send& x) {
  return f(caf::meta::type_name("kvferry.chunk_send"), x.room, x.pages, x.last, x.states);
}

/// Decode: the destination pages of the room (one per prefill page, in order)
/// and its aux row.
struct receiver_init {
  uint64_t room = 0;
  std::vector<uint32_t> dst_pages;
  uint32_t aux_slot = no_aux_slot;
  std::vector<std::vector<uint32_t>> states;  ///< destination state indices, per component
  /// Tokens of the room this rank already holds (prefix reuse; room.hpp's
  /// room_request): the pages start at the page holding this token.
  uint32_t prefix_tokens = 0;

  friend bool operator==(const receiver_init&, const receiver_init&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, receiver_init& x) {
  return f(caf::meta::type_name("kvferry.receiver_init"), x.room, x.dst_pages, x.aux_slot, x.states,
           x.prefix_tokens);
}

/// The answer to a poll by message (actor schedulers).
struct room_status {
  room_key key;
  kv_poll state = kv_poll::bootstrapping;
  failure why;
  /// On a prefill rank, from WaitingForInput on: the tokens the decode side
  /// already holds (prefix reuse); the scheduler computes from there.
  uint32_t prefix_tokens = 0;

  friend bool operator==(const room_status&, const room_status&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, room_status& x) {
  return f(caf::meta::type_name("kvferry.room_status"), x.key, x.state, x.why, x.prefix_tokens);
}

}  // namespace kvferry
