#include "actors/transfer/staged_pass.hpp"

#include "actors/staging/staging_ring.hpp"

namespace kvferry {

staged_pass::decision staged_pass::decide(const rank_ref& peer, const transfer_job& j,
                                          uint64_t ring_size, uint64_t consumed,
                                          gather_space& space) {
  auto room = std::make_pair(peer, j.meta.key);
  if (held_back_.count(room))
    return {step::skip};
  // A last chunk with no pages (its states and aux row only) goes once the
  // room's earlier chunks went.
  if (j.meta.src_pages.empty())
    return {step::tail_only};
  if (!j.grant || !may_write(j.grant->end, ring_size, consumed)) {
    held_back_.insert(room);
    return {step::wait};
  }
  if (j.grant->offset > ring_size || j.staged_bytes > ring_size - j.grant->offset ||
      j.grant->end < j.grant->offset + j.staged_bytes)
    return {step::bad_grant};
  auto at = space_reserved_ ? std::nullopt : space.take(j.staged_bytes);
  if (!at) {
    held_back_.insert(room);
    space_reserved_ = true;
    return {step::wait};
  }
  return {step::go, *at};
}

std::string staged_pass::bad_grant_cause(const transfer_job& j, uint64_t ring_size,
                                         const rank_ref& peer) {
  return "staging grant at ring offset " + std::to_string(j.grant ? j.grant->offset : 0) + " for " +
         std::to_string(j.staged_bytes) + " bytes exceeds the ring of " +
         std::to_string(ring_size) + " bytes of " + to_string(peer);
}

}  // namespace kvferry
