// Messages between a prefill rank and its transfer actor, and the transport's
// completions turned into messages.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "messages/failure.hpp"
#include "messages/handles.hpp"
#include "messages/ids.hpp"
#include "messages/layout.hpp"

namespace kvferry {

/// Connect the data plane to a decode rank whose registration was accepted.
struct peer_connect {
  rank_ref peer;
  std::string endpoint;
  kv_layout layout;  ///< the peer's layout: where its pages and aux rows are
  /// The peer's staging ring, when its chunks from this rank take it.
  staging_offer staging;
  std::string credential;  ///< what the peer's receiver wants proved (dest_registration)
  std::string checksum{};  ///< the digests the peer checks ("xxh3"; "": none)

  friend bool operator==(const peer_connect&, const peer_connect&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, peer_connect& x) {
  return f(caf::meta::type_name("kvferry.peer_connect"), x.peer, x.endpoint, x.layout, x.staging,
           x.credential, x.checksum);
}

/// Write one chunk of a room: src_pages[i] → dst_pages[i] in every KV buffer
/// (the heads the two ranks share), and, on the last chunk, the state
/// components and then the aux row, after all KV of the room.
struct chunk_job {
  room_key key;
  rank_ref peer;
  uint32_t chunk = 0;
  uint32_t first_page = 0;  ///< position of the chunk's first page in the room
  /// Tokens of the chunk's first page the destination already holds (prefix
  /// reuse; only on the room's first chunk): they are not written.
  uint32_t skip_tokens = 0;
  std::vector<uint32_t> src_pages;
  std::vector<uint32_t> dst_pages;
  bool last = false;
  uint32_t src_aux = UINT32_MAX;  ///< set on the last chunk for the destination that takes aux
  uint32_t dst_aux = UINT32_MAX;
  std::vector<std::vector<uint32_t>> src_states;  ///< likewise, per state component
  std::vector<std::vector<uint32_t>> dst_states;

  friend bool operator==(const chunk_job&, const chunk_job&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, chunk_job& x) {
  return f(caf::meta::type_name("kvferry.chunk_job"), x.key, x.peer, x.chunk, x.first_page,
           x.skip_tokens, x.src_pages, x.dst_pages, x.last, x.src_aux, x.dst_aux, x.src_states,
           x.dst_states);
}

/// The outcome of one chunk_job: placed, or the failure of its room.
struct chunk_result {
  room_key key;
  rank_ref peer;  ///< the destination rank of the job
  uint32_t chunk = 0;
  bool last = false;
  uint32_t pages = 0;
  uint64_t bytes = 0;   ///< bytes written (KV and aux)
  uint32_t writes = 0;  ///< transport writes after coalescing
  bool staged = false;  ///< its KV went into the peer's staging ring
  uint32_t first_page = 0;
  failure why;                      ///< set when the chunk failed
  std::vector<uint64_t> digests{};  ///< of what it wrote, when the peer checks them

  friend bool operator==(const chunk_result&, const chunk_result&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, chunk_result& x) {
  return f(caf::meta::type_name("kvferry.chunk_result"), x.key, x.peer, x.chunk, x.last, x.pages,
           x.bytes, x.writes, x.staged, x.first_page, x.why, x.digests);
}

/// A transport completion: batch `cookie` finished with status `code`
/// (transport::code as an integer; 0 = ok) and the backend's message.
struct batch_done {
  uint64_t cookie = 0;
  uint8_t code = 0;
  std::string message;

  friend bool operator==(const batch_done&, const batch_done&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, batch_done& x) {
  return f(caf::meta::type_name("kvferry.batch_done"), x.cookie, x.code, x.message);
}

}  // namespace kvferry
