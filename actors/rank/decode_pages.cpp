// The decode rank's pages: once a room concludes, nothing more may land in
// its pages before they go back to the scheduler. The room's fence closes
// (and its staging actor closes it, if it stages); a fence that is not quiet
// yet waits in fence_drains until it is, and writers stuck half way through
// a batch are cut off.
#include <chrono>

#include "actors/base/guard.hpp"
#include "actors/rank/decode_rank_steps.hpp"
#include "messages/staging.hpp"

namespace kvferry::decode_steps {

namespace {

constexpr auto quiesce_every = std::chrono::milliseconds{10};

void arm_quiesce(self_ptr self) {
  if (self->state.quiesce_armed || self->state.draining.empty())
    return;
  self->state.quiesce_armed = true;
  self->delayed_send(self, quiesce_every, quiesce_atom_v);
}

/// Nothing more can land in a concluded room's pages through the transport:
/// its pages go back to the scheduler, once its staging actor (if it stages)
/// closed it too, so that no scatter writes into them afterwards. The ring
/// space goes back then as well: no write into it can land any more either.
void release_quiet(self_ptr self, room_slot_ptr slot, const room_key& key, bool staged) {
  if (!staged) {
    if (slot)
      slot->release();
    return;
  }
  auto done = [slot] {
    if (slot)
      slot->release();
  };
  self->request(self->state.cfg.staging.handle, caf::infinite, staging_close{key})
      .then(guard(self, on_exception, [done](staging_close&) { done(); }),
            // The staging actor is gone: it scatters nothing any more.
            guard(self, on_exception, [done](caf::error&) { done(); }));
}

}  // namespace

/// Closes the room's fence: once nothing with it can land, its pages are
/// released to the scheduler. A room that never sent its requests never
/// opened one.
void release(self_ptr self, decode_room& room) {
  auto& st = self->state;
  auto token = room.key().generation;
  if (!room.requested() || st.cfg.net->close_fence(token)) {
    release_quiet(self, room.slot(), room.key(), room.staged());
    return;
  }
  fence_drains::drain d{room.slot(), {}, self->clock().now(), room.staged(), room.key()};
  for (auto& s : room.sources())
    if (!s.dummy)
      d.writers.push_back(s.endpoint);
  st.draining.add(token, std::move(d));
  arm_quiesce(self);
}

/// The pages of concluded rooms whose fence is quiet now go back; writers
/// stuck half way through a batch (frozen, partitioned) are cut off, so that
/// their batch stops where it is.
void quiesce(self_ptr self) {
  auto& st = self->state;
  st.quiesce_armed = false;
  auto quiet = st.draining.sweep(
      self->clock().now(), st.cfg.limits.verdict,
      [&](uint64_t token) { return st.cfg.net->close_fence(token); },
      [&](const std::string& writer) { st.cfg.net->disconnect(writer); });
  for (auto& d : quiet)
    release_quiet(self, d.slot, d.key, d.staged);
  arm_quiesce(self);
}

}  // namespace kvferry::decode_steps
