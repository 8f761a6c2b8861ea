// The staging path for heterogeneous TP (MHA/GQA with different TP sizes):
// each prefill writer gathers its head slice of every layer of a chunk into
// one contiguous block and writes it with one bulk write into a ring slot of
// the decode rank's staging actor, which scatters it into the room's pages.
//
// staging_offer (in dest_registration and peer_connect) is in handles.hpp.
//
//   decode rank          staging actor                 prefill transfer actor
//     │ staging_room ──▶ │  (writers, pages)
//     │                  │ ◀── staging_ask (room, chunk, pages, bytes)
//     │                  │ ─── staging_grant (ring offset, end) ──▶ │
//     │                  │ ─── staging_watermark (as it moves) ───▶ │  writes once
//     │                  │                                          │  may_write()
//     │ ◀────────────────┼──────── chunk_landed (staged) ── prefill rank
//     │ chunk_landed ──▶ │  scatter into the pages
//     │ ◀ chunk_scattered│  then counts as landed (room.hpp)
//     │ staging_close ─▶ │  (room released: its ring space too)
#pragma once

#include <cstdint>
#include <vector>

#include "messages/failure.hpp"
#include "messages/handles.hpp"
#include "messages/ids.hpp"
#include "messages/layout.hpp"

namespace kvferry {

/// A prefill writer asks for ring space for its part of chunk `chunk` of a
/// room: `pages` pages from position `first_page` of the room, `bytes` staged.
struct staging_ask {
  room_key key;
  rank_ref writer;
  uint32_t chunk = 0;
  uint32_t first_page = 0;
  uint32_t pages = 0;
  uint64_t bytes = 0;

  friend bool operator==(const staging_ask&, const staging_ask&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, staging_ask& x) {
  return f(caf::meta::type_name("kvferry.staging_ask"), x.key, x.writer, x.chunk, x.first_page,
           x.pages, x.bytes);
}

/// Where the writer's part of the chunk goes: `offset` in the ring; `end` is
/// the linear end of the chunk's grant, to compare with the watermark
/// (actors/staging/staging_ring.hpp's may_write); `consumed` is the
/// watermark when the grant was made.
struct staging_grant {
  room_key key;
  uint32_t chunk = 0;
  uint64_t offset = 0;
  uint64_t end = 0;
  uint64_t consumed = 0;

  friend bool operator==(const staging_grant&, const staging_grant&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, staging_grant& x) {
  return f(caf::meta::type_name("kvferry.staging_grant"), x.key, x.chunk, x.offset, x.end,
           x.consumed);
}

/// The ring of decode rank `ring` was consumed up to linear position `consumed`.
struct staging_watermark {
  rank_ref ring;
  uint64_t consumed = 0;

  friend bool operator==(const staging_watermark&, const staging_watermark&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, staging_watermark& x) {
  return f(caf::meta::type_name("kvferry.staging_watermark"), x.ring, x.consumed);
}

/// One writer of a staged room: a prefill rank and its layout.
struct staging_writer {
  rank_ref rank;
  kv_layout layout;

  friend bool operator==(const staging_writer&, const staging_writer&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, staging_writer& x) {
  return f(caf::meta::type_name("kvferry.staging_writer"), x.rank, x.layout);
}

/// A decode rank opens a staged room on its staging actor: the room's
/// destination pages and the writers that stage into it.
struct staging_room {
  room_key key;
  std::vector<uint32_t> dst_pages;
  std::vector<staging_writer> writers;
  /// Tokens of the first page the rank already holds (prefix reuse): the
  /// scatter leaves them as they are.
  uint32_t skip_tokens = 0;

  friend bool operator==(const staging_room&, const staging_room&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, staging_room& x) {
  return f(caf::meta::type_name("kvferry.staging_room"), x.key, x.dst_pages, x.writers,
           x.skip_tokens);
}

/// The room was released (nothing of it can land any more): its ring space
/// goes back.
struct staging_close {
  room_key key;

  friend bool operator==(const staging_close&, const staging_close&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, staging_close& x) {
  return f(caf::meta::type_name("kvferry.staging_close"), x.key);
}

}  // namespace kvferry
