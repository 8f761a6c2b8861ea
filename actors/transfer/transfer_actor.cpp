// The transfer actor's behaviour and its direct path: a chunk job is planned
// (planner), posted as batches, and finished when its batches completed. The
// staged path is in transfer_staged.cpp, what a throw fails in
// transfer_shield.cpp; the bookkeeping is job_book's.
#include "actors/transfer/transfer_actor.hpp"

#include <exception>
#include <optional>
#include <string>
#include <utility>

#include <caf/actor_cast.hpp>
#include <caf/send.hpp>
#include <caf/weak_intrusive_ptr.hpp>

#include "actors/base/guard.hpp"
#include "actors/base/log.hpp"
#include "actors/plan/planner.hpp"
#include "actors/transfer/to_failure.hpp"
#include "actors/transfer/transfer_steps.hpp"
#include "messages/room.hpp"

namespace kvferry {

namespace transfer_steps {

namespace {

/// Who gets the chunk_result of job `id`; forgets it.
prefill_rank_actor take_reply_to(transfer_state& st, uint64_t id) {
  prefill_rank_actor to;
  if (auto i = st.reply_to.find(id); i != st.reply_to.end()) {
    to = std::move(i->second);
    st.reply_to.erase(i);
  }
  return to;
}

/// Posts one batch of a job. On a refusal the job records the failure.
void post(self_ptr self, uint64_t id, write_plan plan, bool is_aux) {
  auto& st = self->state;
  auto& j = st.book.at(id);
  auto& peer = st.peers.at(j.meta.peer);
  auto writes = plan.ops.size();
  auto cookie = st.book.add_batch(id, plan.bytes, static_cast<uint32_t>(writes), is_aux);
  st.counters->writes += writes;
  if (st.figures)
    st.figures->posted(j.meta.peer, plan.bytes);
  // The room's generation is its fence: the decode side refuses it once the
  // room's pages are released.
  auto rc = st.net->post(
      peer.id, transport::write_batch{cookie, std::move(plan.ops), j.meta.key.generation});
  if (rc.ok())
    return;
  // Not posted: no completion will come for it.
  st.book.refused(cookie);
  if (st.figures)
    st.figures->failed(j.meta.peer);
  j.fail(to_failure(rc, st.net->name(), j.meta.peer, st.self));
}

/// Appends what a last chunk carries after the KV: the state components,
/// then the aux row (the decode side commits on the aux row).
transport::status plan_tail(write_plan& plan, const transfer_state& st, const chunk_job& job) {
  auto& dst = st.peers.at(job.peer).layout;
  if (!job.src_states.empty() || !job.dst_states.empty())
    if (auto rc = plan_states(plan, st.pool.layout, dst, job.src_states, job.dst_states); !rc.ok())
      return rc;
  return plan_aux(plan, st.pool.layout, dst, job.src_aux, job.dst_aux);
}

/// Posts the states and aux row of a last chunk, after all KV of its room landed.
void post_aux(self_ptr self, uint64_t id) {
  auto& st = self->state;
  auto& j = st.book.at(id);
  j.aux_waiting = false;
  write_plan plan;
  if (auto rc = plan_tail(plan, st, j.meta); !rc.ok())
    j.fail(failure{errc::invalid_argument, rc.message(), st.self});
  else
    post(self, id, std::move(plan), true);
}

void on_job(self_ptr self, uint64_t id, chunk_job& job) {
  auto& st = self->state;
  st.reply_to[id] = caf::actor_cast<prefill_rank_actor>(self->current_sender());
  auto& j = st.book.open(id);
  j.meta = std::move(job);
  auto peer = st.peers.find(j.meta.peer);
  if (peer == st.peers.end()) {
    auto why = st.unreachable.count(j.meta.peer) ? st.unreachable[j.meta.peer]
                                                 : std::string{"never registered"};
    j.fail(failure{errc::connect_failed,
                   "no data-plane connection to " + to_string(j.meta.peer) + ": " + why, st.self});
    finish(self, id);
    return;
  }
  if (peer->second.checksum != kv_checksum::off && !j.meta.src_pages.empty()) {
    // Hashed before any byte goes: what the peer checks is what was meant.
    if (st.pool.device) {
      j.fail(failure{errc::unsupported,
                     "KV checksums over device memory are not built (" + to_string(j.meta.peer) +
                         " asks for " + to_string(peer->second.checksum) + ")",
                     st.self});
      finish(self, id);
      return;
    }
    auto digests = chunk_digests(st.pool.layout, peer->second.layout, digest_side::source,
                                 st.pool.kv_bases, j.meta.src_pages, j.meta.skip_tokens);
    if (!digests.ok()) {
      j.fail(failure{errc::invalid_pages, digests.error().message(), st.self});
      finish(self, id);
      return;
    }
    j.digests = std::move(digests).value();
  }
  if (peer->second.staging.offered() && !j.meta.src_pages.empty()) {
    start_staged(self, id);
    return;
  }
  auto plan = plan_kv(st.pool.layout, peer->second.layout, j.meta.src_pages, j.meta.dst_pages,
                      st.caps.max_write_bytes, j.meta.skip_tokens);
  if (!plan.ok()) {
    j.fail(failure{errc::invalid_pages, plan.error().message(), st.self});
    finish(self, id);
    return;
  }
  launch(self, id, std::move(plan).value());
}

/// A chunk job arrived.
void take_job(self_ptr self, chunk_job& job) {
  auto id = self->state.book.draw();
  handles(self, "a chunk job", id);
  on_job(self, id, job);
}

void on_done(self_ptr self, batch_done& done) {
  auto& st = self->state;
  auto c = st.book.complete(done.cookie);
  if (!c)
    return;
  auto& j = st.book.at(c->job);
  auto code = static_cast<transport::code>(done.code);
  if (code != transport::code::ok) {
    if (st.figures)
      st.figures->failed(j.meta.peer);
    j.fail(to_failure(transport::status::from(code, done.message), st.net->name(), j.meta.peer,
                      st.self));
  }
  if (!c->aux && j.gather) {
    // The bulk write read its bytes: the gather space may serve another.
    st.gathered.give(*j.gather);
    j.gather.reset();
  }
  if (c->kv_landed) {
    // A last chunk of this room waiting for its KV to land may post aux now.
    for (auto& [other_id, other] : st.book.jobs())
      if (other.aux_waiting && other.meta.key == j.meta.key && other.meta.peer == j.meta.peer) {
        if (other.why)
          other.aux_waiting = false;
        else
          post_aux(self, other_id);
        if (other.done()) {
          finish(self, other_id);
          break;
        }
      }
  }
  if (auto* k = st.book.find(c->job); k && k->done())
    finish(self, c->job);
  pump_all(self);
}

/// Connects the data plane to a decode rank whose registration was accepted.
/// Staged jobs still waiting for that rank's ring fail either way.
void connect_peer(self_ptr self, peer_connect& pc) {
  auto& st = self->state;
  auto id = st.net->connect(pc.endpoint, pc.credential);
  if (!id.ok()) {
    log().error("[{}] cannot connect the data plane to {} at {}: {}", to_string(st.self),
                to_string(pc.peer), pc.endpoint, id.error().to_string());
    st.unreachable[pc.peer] = id.error().to_string();
    drop_waiting(
        self, pc.peer,
        failure{errc::connect_failed,
                "no data-plane connection to " + to_string(pc.peer) + ": " + id.error().to_string(),
                st.self});
    st.peers.erase(pc.peer);
    return;
  }
  st.unreachable.erase(pc.peer);
  if (!st.staging.gather)
    pc.staging = staging_offer{};
  // Jobs still waiting for the previous incarnation's ring fail now.
  drop_waiting(
      self, pc.peer,
      failure{errc::peer_down,
              to_string(pc.peer) + " registered again while a staged chunk waited for its ring",
              st.self});
  st.peers[pc.peer] = transfer_state::peer{*id, std::move(pc.layout), pc.staging, 0,
                                           checksum_named(pc.checksum).value_or(kv_checksum::off)};
}

}  // namespace

void finish(self_ptr self, uint64_t id) {
  auto& st = self->state;
  auto* j = st.book.find(id);
  if (!j)
    return;
  auto r = j->result();
  ++st.counters->chunks;
  if (j->staged && !j->why)
    ++st.counters->staged;
  if (j->gather)
    st.gathered.give(*j->gather);
  if (r.why)
    log().warn("[{}] {}: chunk {} to {} failed: {}", to_string(st.self), to_string(r.key), r.chunk,
               to_string(j->meta.peer), to_string(r.why));
  self->send(take_reply_to(st, id), std::move(r));
  st.book.close(id);
}

void launch(self_ptr self, uint64_t id, write_plan plan) {
  auto& st = self->state;
  auto& j = st.book.at(id);
  bool with_tail = j.meta.last && (j.meta.src_aux != no_aux_slot || !j.meta.src_states.empty());
  if (with_tail) {
    // The stamp lets decode check that the row it commits is this room's.
    if (j.meta.src_aux != no_aux_slot)
      write_stamp(st.pool, j.meta.src_aux, j.meta.key);
    if (st.caps.ordered_writes) {
      // Ops land in order on this backend: states and the aux row ride last in the batch.
      if (auto rc = plan_tail(plan, st, j.meta); !rc.ok()) {
        j.fail(failure{errc::invalid_argument, rc.message(), st.self});
        finish(self, id);
        return;
      }
    } else {
      j.aux_waiting = true;
    }
  }
  if (!plan.ops.empty())
    post(self, id, std::move(plan), false);
  if (j.aux_waiting && !j.why && !st.book.kv_in_flight(j.meta.key, j.meta.peer))
    post_aux(self, id);
  if (j.done())
    finish(self, id);
}

void abandon(self_ptr self, uint64_t id) {
  auto& st = self->state;
  auto* j = st.book.find(id);
  if (!j)
    return;
  if (j->gather)
    st.gathered.give(*j->gather);
  st.queue.remove(j->meta.peer, id);
  st.reply_to.erase(id);
  st.book.abandon(id);
}

}  // namespace transfer_steps

transfer_actor::behavior_type transfer(transfer_actor::stateful_pointer<transfer_state> self,
                                       rank_ref rank, local_pool pool,
                                       std::shared_ptr<transport::transport> net,
                                       transfer_staging staging,
                                       std::shared_ptr<transfer_counters> counters,
                                       std::shared_ptr<metrics::registry> metrics) {
  using namespace transfer_steps;
  auto& st = self->state;
  st.self = std::move(rank);
  st.pool = std::move(pool);
  st.net = std::move(net);
  st.staging = staging;
  st.counters = counters ? std::move(counters) : std::make_shared<transfer_counters>();
  st.gathered = gather_space{staging.gather ? staging.size : 0};
  st.caps = st.net->capabilities();
  if (metrics) {
    st.figures = std::make_shared<metrics::transfer_figures>(std::move(metrics), st.self,
                                                             std::string{st.net->name()});
    st.figures->watch_bandwidth();
  }
  // Completions arrive on the transport's threads; they become messages. The
  // handler holds the actor weakly: the transport lives inside this actor.
  caf::weak_actor_ptr weak = self->ctrl();
  st.net->set_completion_handler([weak](transport::completion c) {
    if (auto strong = weak.lock())
      caf::anon_send(
          caf::actor_cast<transfer_actor>(strong),
          batch_done{c.cookie, static_cast<uint8_t>(c.result.error_code()), c.result.message()});
  });
  return guarded<transfer_actor::behavior_type>(
      self, on_exception,
      [self](peer_connect& pc) {
        handles(self, "a peer connect", std::nullopt);
        connect_peer(self, pc);
      },
      [self](chunk_job& job) { take_job(self, job); },
      [self](batch_done& done) {
        handles(self, "a batch completion", self->state.book.job_of(done.cookie));
        on_done(self, done);
      },
      [self](staging_watermark& wm) {
        handles(self, "a staging watermark", std::nullopt);
        on_watermark(self, wm);
      },
      [self](slot_timeout_atom, uint64_t id) {
        handles(self, "a staging timer", id);
        on_slot_timeout(self, id);
      });
}

}  // namespace kvferry
