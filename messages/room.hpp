// The room protocol between a decode rank and the prefill ranks that write
// into it (the decider's part is in decision.hpp).
//
//   decode                                   prefill
//     │ dest_registration (once per peer) ──▶ │  layouts checked, transport connects
//     │ ◀── dest_accepted                     │
//     │ room_request (pages, aux, decider) ─▶ │  WaitingForInput once every decode
//     │                                       │  rank it serves has asked
//     │ ◀── chunk_landed (per chunk, last)    │  writes placed before each message
//
// Neither side concludes a room on its own word: every participant reports to
// the room's decider (room_finished, room_failure) and concludes with its
// room_verdict, so all of them conclude the same.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "messages/failure.hpp"
#include "messages/handles.hpp"
#include "messages/ids.hpp"
#include "messages/kv_poll.hpp"
#include "messages/layout.hpp"

namespace kvferry {

/// A decode rank introduces itself to a prefill rank it will receive from.
struct dest_registration {
  rank_ref decode_rank;
  decode_rank_actor handle;
  std::string
      data_endpoint;  ///< where the prefill's transport connects, e.g. "tcp://127.0.0.1:4711"
  kv_layout layout;
  staging_offer staging;  ///< its staging ring, if it has one (messages/staging.hpp)
  /// What the prefill rank's transport proves to this rank's receiver when it
  /// connects (transport::credential_for of the prefill rank's endpoint).
  std::string data_credential;
  /// End-to-end KV checksums this rank checks ("xxh3"; "" or "off": none):
  /// the prefill rank sends the digests of what it writes with every chunk.
  std::string checksum{};

  friend bool operator==(const dest_registration&, const dest_registration&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, dest_registration& x) {
  return f(caf::meta::type_name("kvferry.dest_registration"), x.decode_rank, x.handle,
           x.data_endpoint, x.layout, x.staging, x.data_credential, x.checksum);
}

/// The prefill rank accepted the registration (its layout matched).
struct dest_accepted {
  rank_ref prefill_rank;
  /// Its chunks to this rank take the staging ring (offered, applicable to
  /// the two layouts, and staging is on at the prefill rank).
  bool staged = false;

  friend bool operator==(const dest_accepted&, const dest_accepted&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, dest_accepted& x) {
  return f(caf::meta::type_name("kvferry.dest_accepted"), x.prefill_rank, x.staged);
}

/// Where one room's KV goes on one decode rank: the destination page of each of
/// the room's pages, in order, the aux row and the state indices (for the
/// source that writes them), and the room's decider. A dummy request names a
/// source that takes part in the room but writes nothing into this rank.
///
/// Prefix reuse: the decode rank already holds the room's first
/// `prefix_tokens` tokens (SGLang's decode_prefix_len). The pages of both
/// sides start at the page that holds token `prefix_tokens`; of that first
/// page only the tokens from `prefix_tokens % page_size` on are written.
struct room_request {
  room_key key;
  rank_ref decode_rank;
  decider_actor decider;
  std::vector<uint32_t> dst_pages;
  uint32_t aux_slot = no_aux_slot;
  std::vector<std::vector<uint32_t>> dst_states;
  bool dummy = false;
  uint32_t prefix_tokens = 0;

  friend bool operator==(const room_request&, const room_request&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, room_request& x) {
  return f(caf::meta::type_name("kvferry.room_request"), x.key, x.decode_rank, x.decider,
           x.dst_pages, x.aux_slot, x.dst_states, x.dummy, x.prefix_tokens);
}

/// Every write of one chunk has been placed in the decode rank's memory. On the
/// last chunk the aux row has been placed too.
struct chunk_landed {
  room_key key;
  rank_ref prefill_rank;
  uint32_t chunk = 0;
  uint32_t pages = 0;
  uint64_t bytes = 0;
  bool last = false;
  /// Staged: the chunk's KV sits in the decode rank's staging ring, to be
  /// scattered into the room's pages from position `first_page` on.
  bool staged = false;
  uint32_t first_page = 0;
  /// With checksums on: the source's digests of what it wrote, per buffer
  /// pair and page (actors/plan/kv_digest.hpp), checked before the chunk counts.
  std::vector<uint64_t> digests{};

  friend bool operator==(const chunk_landed&, const chunk_landed&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, chunk_landed& x) {
  return f(caf::meta::type_name("kvferry.chunk_landed"), x.key, x.prefill_rank, x.chunk, x.pages,
           x.bytes, x.last, x.staged, x.first_page, x.digests);
}

/// A staged chunk was scattered into the room's pages (then it counts as
/// landed), or could not be (`why`).
struct chunk_scattered {
  chunk_landed landed;
  failure why;

  friend bool operator==(const chunk_scattered&, const chunk_scattered&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, chunk_scattered& x) {
  return f(caf::meta::type_name("kvferry.chunk_scattered"), x.landed, x.why);
}

/// A participant saw a fault in a room; the decider turns it into the verdict.
/// A decode rank that has no key yet sends generation 0 (matched by room id).
struct room_failure {
  room_key key;
  failure why;

  friend bool operator==(const room_failure&, const room_failure&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, room_failure& x) {
  return f(caf::meta::type_name("kvferry.room_failure"), x.key, x.why);
}

/// A prefill rank concluded a room without a verdict (its decider was lost)
/// and tells the other ranks of its instance, so that a rank no decode rank
/// has asked for the room yet concludes it with the same cause instead of
/// its own Bootstrapping deadline. Taken only from a rank of the same
/// instance, for a room that has no decider there.
struct sibling_concluded {
  uint64_t room = 0;
  failure why;

  friend bool operator==(const sibling_concluded&, const sibling_concluded&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sibling_concluded& x) {
  return f(caf::meta::type_name("kvferry.sibling_concluded"), x.room, x.why);
}

/// The outcome of a room, decided once, the same for every participant.
struct room_verdict {
  room_key key;
  kv_poll outcome = kv_poll::failed;  ///< Success or Failed
  failure why;                        ///< set when Failed

  friend bool operator==(const room_verdict&, const room_verdict&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, room_verdict& x) {
  return f(caf::meta::type_name("kvferry.room_verdict"), x.key, x.outcome, x.why);
}

}  // namespace kvferry
