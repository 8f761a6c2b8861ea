// The staging actor's bookkeeping, plain logic (no CAF, no memory): the
// staged rooms of one decode rank, the ring space of each (room, chunk) and
// which of its writers have arrived.
//
// The first writer to ask for a chunk allocates the whole chunk: the sum of
// every writer's part (staging_plan's staged_bytes), in writer order; each
// writer is granted its own part. Every remote value is checked: the writer
// belongs to the room, the pages lie inside the room, the bytes are what its
// layout stages, and later askers and arrivals agree with the first. A chunk
// larger than the ring is refused with both sizes. Once every writer of a
// chunk arrived (and was scattered) its space goes back; closing a room gives
// back the space of all its chunks.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <variant>
#include <vector>

#include "actors/plan/staging_plan.hpp"
#include "actors/staging/staging_ring.hpp"
#include "messages/failure.hpp"
#include "messages/staging.hpp"

namespace kvferry {

class staging_book {
 public:
  /// `local` is the decode rank's layout; `self` names it in failures.
  staging_book(kv_layout local, rank_ref self, uint64_t ring_size);

  uint64_t ring_size() const { return ring_.size(); }
  /// Linear position up to which the ring was consumed.
  uint64_t watermark() const { return ring_.watermark(); }
  /// Bytes of the ring handed out and not consumed yet.
  uint64_t ring_in_use() const { return ring_.in_use(); }

  /// Opens a staged room (again: ignored).
  void open(staging_room spec);
  bool knows(const room_key& key) const { return rooms_.count(key) > 0; }
  size_t rooms() const { return rooms_.size(); }
  /// Chunks whose space is held.
  size_t chunks_held() const { return ring_.held(); }

  /// A writer's ask: its grant, or why not (the room must be open).
  std::variant<staging_grant, failure> ask(const staging_ask& a);

  /// What to scatter for an arrival: the writer's block at `ring_offset` and
  /// the copies into the local pool.
  struct scatter {
    uint64_t ring_offset = 0;
    std::vector<staged_copy> copies;
  };

  /// A writer's staged chunk landed: the scatter to run now, or why it
  /// cannot be (the room stays for its decider to fail). The writer counts as
  /// arrived; the caller runs the scatter before anything else touches the
  /// ring, and reads watermark() after.
  std::variant<scatter, failure> arrive(const chunk_landed& msg);

  /// Closes a room and gives its space back. True if the watermark moved.
  bool close(const room_key& key);

 private:
  struct chunk_space {
    ring_grant grant;
    uint32_t first_page = 0;
    uint32_t pages = 0;
    std::vector<uint64_t> part_offsets;  // by writer index, inside the grant
    std::set<uint32_t> arrived;          // writer indices
  };
  struct room {
    staging_room spec;
    std::map<uint32_t, chunk_space> chunks;
  };

  failure bad(errc code, std::string cause) const { return failure{code, std::move(cause), self_}; }
  /// The writer's index in the room, or a failure naming it.
  std::variant<uint32_t, failure> writer_of(const room& r, const rank_ref& writer,
                                            const char* what) const;
  /// Why writer `writer`'s ask cannot be granted as asked (pages outside the
  /// room, a byte count its layout does not give), or nullopt.
  std::optional<failure> check_ask(const room& r, uint32_t writer, const staging_ask& a) const;

  kv_layout local_;
  rank_ref self_;
  staging_ring ring_;
  std::map<room_key, room> rooms_;
};

}  // namespace kvferry
