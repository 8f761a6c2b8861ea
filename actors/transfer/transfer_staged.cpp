// The transfer actor's staged path: a staged chunk asks the peer's staging
// actor for ring space, waits in the staged queue for its grant and for the
// ring's watermark to free its slot, is gathered into the gather buffer and
// goes as one bulk write (launch, transfer_actor.cpp). Which waiting job may
// go is staged_pass's rule.
#include <algorithm>
#include <span>
#include <string>
#include <vector>

#include "actors/base/guard.hpp"
#include "actors/base/log.hpp"
#include "actors/plan/staging_plan.hpp"
#include "actors/transfer/staged_pass.hpp"
#include "actors/transfer/to_failure.hpp"
#include "actors/transfer/transfer_steps.hpp"

namespace kvferry::transfer_steps {

namespace {

/// A staged job that will not be posted: its room fails with `why`, and so
/// do the later chunks of the room to that peer still waiting behind it
/// (their writes would be wasted).
void drop_staged(self_ptr self, uint64_t id, failure why) {
  auto& st = self->state;
  auto* j = st.book.find(id);
  if (!j || j->posted)
    return;  // finished, or already posted
  for (auto d : st.queue.cut(j->meta.peer, id)) {
    st.book.at(d).fail(why);
    finish(self, d);
  }
}

/// Gathers staged job `id` (its gather space taken at `at`) and launches its
/// bulk write into `peer`'s ring.
void gather_and_write(self_ptr self, uint64_t id, const transfer_state::peer& peer, uint64_t at) {
  auto& st = self->state;
  auto& j = st.book.at(id);
  auto copies = plan_gather(st.pool.layout, peer.layout, j.meta.src_pages);
  if (!copies.ok()) {
    j.fail(failure{errc::invalid_pages, copies.error().message(), st.self});
    finish(self, id);
    return;
  }
  // Every piece checked against its KV buffer and the gather buffer.
  auto lists = segments_by_buffer(*copies, st.pool.kv_bases.size(), at, true);
  std::span<std::byte> gather{st.staging.gather, st.staging.size};
  transport::status gathered;
  for (size_t b = 0; b < lists.size() && gathered.ok(); ++b)
    if (!lists[b].empty())
      gathered = st.pool.copy_segments(
          gather, {st.pool.kv_bases[b], st.pool.layout.kv_buffers[b].length}, lists[b]);
  if (!gathered.ok()) {
    j.fail(failure{errc::internal, "gathering a staged chunk: " + gathered.message(), st.self});
    finish(self, id);
    return;
  }
  write_plan plan;
  plan.ops.push_back({st.staging.region, at, peer.staging.region, j.grant->offset, j.staged_bytes});
  plan.bytes = j.staged_bytes;
  launch(self, id, std::move(plan));
}

/// The peer's staging actor granted ring space to staged job `id`.
void on_grant(self_ptr self, uint64_t id, const rank_ref& rank, const staging_grant& g) {
  auto& st = self->state;
  auto* j = st.book.find(id);
  if (!j)
    return;
  if (g.key != j->meta.key || g.chunk != j->meta.chunk) {
    drop_staged(self, id,
                failure{errc::invalid_argument,
                        "staging grant for chunk " + std::to_string(g.chunk) + " of " +
                            to_string(g.key) + " answered the ask for chunk " +
                            std::to_string(j->meta.chunk) + " of " + to_string(j->meta.key),
                        st.self});
    pump_all(self);
    return;
  }
  j->grant = g;
  if (auto p = st.peers.find(rank); p != st.peers.end())
    p->second.consumed = std::max(p->second.consumed, g.consumed);
  pump_all(self);
}

}  // namespace

void pump_all(self_ptr self) {
  auto& st = self->state;
  staged_pass pass;
  for (auto& [id, rank] : st.queue.oldest_first()) {
    auto p = st.peers.find(rank);
    auto* j = st.book.find(id);
    if (p == st.peers.end() || !j || j->posted)
      continue;  // finished meanwhile
    auto& peer = p->second;
    if (!st.queue.contains(rank, id))
      continue;
    auto next = pass.decide(rank, *j, peer.staging.size, peer.consumed, st.gathered);
    switch (next.what) {
      case staged_pass::step::skip:
        break;
      case staged_pass::step::wait:
        if (j->grant && !j->waited) {  // counted once per chunk
          j->waited = true;
          if (st.figures)
            st.figures->staged_waited(rank);
        }
        break;
      case staged_pass::step::tail_only:
        st.queue.remove(rank, id);
        j->posted = true;
        launch(self, id, write_plan{});
        break;
      case staged_pass::step::bad_grant:
        st.queue.remove(rank, id);
        j->fail(failure{errc::out_of_bounds,
                        staged_pass::bad_grant_cause(*j, peer.staging.size, rank), st.self});
        finish(self, id);
        break;
      case staged_pass::step::go:
        st.queue.remove(rank, id);
        j->gather = next.gather_at;
        j->posted = true;
        gather_and_write(self, id, peer, next.gather_at);
        break;
    }
  }
}

void drop_waiting(self_ptr self, const rank_ref& rank, const failure& why) {
  for (auto w : self->state.queue.waiting(rank))
    drop_staged(self, w, why);
  self->state.queue.forget(rank);
}

void start_staged(self_ptr self, uint64_t id) {
  auto& st = self->state;
  auto& j = st.book.at(id);
  auto& peer = st.peers.at(j.meta.peer);
  auto pages = static_cast<uint32_t>(j.meta.src_pages.size());
  if (pages == 0) {
    // Nothing to stage; it only waits behind the room's earlier chunks.
    st.queue.push(j.meta.peer, id, j.meta.key);
    pump_all(self);
    return;
  }
  j.staged = true;
  j.staged_bytes = staged_bytes(st.pool.layout, peer.layout, pages);
  if (j.staged_bytes == 0) {
    j.fail(failure{errc::invalid_argument,
                   "chunk " + std::to_string(j.meta.chunk) + " of " + to_string(j.meta.key) + ": " +
                       to_string(st.self) + " shares no head with " + to_string(j.meta.peer),
                   st.self});
    finish(self, id);
    return;
  }
  if (j.staged_bytes > st.staging.size) {
    j.fail(failure{errc::staging_oversized,
                   "chunk " + std::to_string(j.meta.chunk) + " of " + to_string(j.meta.key) +
                       " stages " + std::to_string(j.staged_bytes) +
                       " bytes, more than the gather buffer of " + std::to_string(st.staging.size) +
                       " bytes of " + to_string(st.self),
                   st.self});
    finish(self, id);
    return;
  }
  st.queue.push(j.meta.peer, id, j.meta.key);
  staging_ask ask{j.meta.key, st.self, j.meta.chunk, j.meta.first_page, pages, j.staged_bytes};
  auto rank = j.meta.peer;
  self->request(peer.staging.handle, st.staging.slot_wait, std::move(ask))
      .then(guard(self, on_exception,
                  [self, id, rank](staging_grant& g) {
                    handles(self, "a staging grant", id);
                    on_grant(self, id, rank, g);
                  }),
            guard(self, on_exception, [self, id](caf::error& err) {
              handles(self, "a refused staging ask", id);
              drop_staged(self, id, to_failure(err, self->state.self));
              pump_all(self);
            }));
  self->delayed_send(self, st.staging.slot_wait, slot_timeout_atom_v, id);
}

void on_watermark(self_ptr self, const staging_watermark& wm) {
  // Only from the staging actor of the peer's current incarnation (it names
  // its decode rank by place).
  auto from = self->current_sender();
  for (auto& [rank, peer] : self->state.peers)
    if (same_place(rank, wm.ring) && from == peer.staging.handle.address() &&
        wm.consumed > peer.consumed) {
      peer.consumed = wm.consumed;
      pump_all(self);
    }
}

void on_slot_timeout(self_ptr self, uint64_t id) {
  auto& st = self->state;
  auto* j = st.book.find(id);
  if (!j || !j->staged || j->posted)
    return;
  std::string state = "no ring space granted";
  if (j->grant) {
    auto consumed = uint64_t{0};
    if (auto p = st.peers.find(j->meta.peer); p != st.peers.end())
      consumed = p->second.consumed;
    state = "its slot ends at " + std::to_string(j->grant->end) +
            " and the ring was consumed up to " + std::to_string(consumed);
  }
  drop_staged(
      self, id,
      failure{errc::deadline,
              "staged chunk " + std::to_string(j->meta.chunk) + " of " + to_string(j->meta.key) +
                  " to " + to_string(j->meta.peer) + " waited " +
                  std::to_string(st.staging.slot_wait.count()) + " ms for its ring slot: " + state,
              st.self});
  pump_all(self);
}

}  // namespace kvferry::transfer_steps
