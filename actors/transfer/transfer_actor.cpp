#include "actors/transfer/transfer_actor.hpp"

#include <algorithm>
#include <exception>
#include <optional>
#include <set>
#include <span>
#include <vector>

#include <caf/actor_cast.hpp>
#include <caf/send.hpp>
#include <caf/weak_intrusive_ptr.hpp>

#include "actors/guard.hpp"
#include "actors/log.hpp"
#include "actors/plan/planner.hpp"
#include "actors/plan/staging_plan.hpp"
#include "actors/staging/staging_ring.hpp"
#include "actors/transfer/to_failure.hpp"
#include "messages/room.hpp"

namespace kvferry {

namespace {

using self_ptr = transfer_actor::stateful_pointer<transfer_state>;

/// The result of job `j`, as far as it got (its cause is set by the caller).
chunk_result result_of(const transfer_state::job& j) {
  chunk_result r;
  r.key = j.meta.key;
  r.peer = j.meta.peer;
  r.chunk = j.meta.chunk;
  r.last = j.meta.last;
  r.pages = static_cast<uint32_t>(j.meta.src_pages.size());
  r.bytes = j.bytes;
  r.writes = j.writes;
  r.staged = j.staged;
  r.first_page = j.meta.first_page;
  return r;
}

/// Sends the result of a finished job and forgets it.
void finish(self_ptr self, uint64_t id) {
  auto i = self->state.jobs.find(id);
  if (i == self->state.jobs.end())
    return;
  auto& j = i->second;
  auto r = result_of(j);
  ++self->state.counters->chunks;
  if (j.staged && !j.why)
    ++self->state.counters->staged;
  r.why = j.why;
  if (j.gather)
    self->state.gathered.give(*j.gather);
  if (r.why)
    log().warn("[{}] {}: chunk {} to {} failed: {}", to_string(self->state.self), to_string(r.key),
               r.chunk, to_string(j.meta.peer), to_string(r.why));
  self->send(j.reply_to, std::move(r));
  self->state.jobs.erase(i);
}

void fail_job(transfer_state::job& j, failure why) {
  if (!j.why)
    j.why = std::move(why);
}

/// Posts one batch of a job. Returns false (and records the failure) if the
/// transport refused it.
bool post(self_ptr self, uint64_t id, write_plan plan, bool is_aux) {
  auto& st = self->state;
  auto& j = st.jobs.at(id);
  auto& peer = st.peers.at(j.meta.peer);
  auto cookie = st.next_id++;
  j.bytes += plan.bytes;
  j.writes += static_cast<uint32_t>(plan.ops.size());
  st.counters->writes += plan.ops.size();
  ++j.pending;
  st.batches.emplace(cookie, std::make_pair(id, is_aux));
  if (!is_aux)
    ++st.kv_in_flight[{j.meta.key, j.meta.peer}];
  // The room's generation is its fence: the decode side refuses it once the
  // room's pages are released.
  auto rc = st.net->post(
      peer.id, transport::write_batch{cookie, std::move(plan.ops), j.meta.key.generation});
  if (rc.ok())
    return true;
  // Not posted: no completion will come for it.
  st.batches.erase(cookie);
  --j.pending;
  if (!is_aux && --st.kv_in_flight[{j.meta.key, j.meta.peer}] == 0)
    st.kv_in_flight.erase({j.meta.key, j.meta.peer});
  fail_job(j, to_failure(rc, st.net->name(), j.meta.peer, st.self));
  return false;
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
  auto& j = st.jobs.at(id);
  j.aux_waiting = false;
  write_plan plan;
  if (auto rc = plan_tail(plan, st, j.meta); !rc.ok())
    fail_job(j, failure{errc::invalid_argument, rc.message(), st.self});
  else
    post(self, id, std::move(plan), true);
}

/// Forgets a job that threw half way: its batches, and the KV it counted in
/// flight. A completion that still comes for one of its batches is ignored.
void abandon(self_ptr self, uint64_t id) {
  auto& st = self->state;
  auto j = st.jobs.find(id);
  if (j == st.jobs.end())
    return;
  auto room_peer = std::make_pair(j->second.meta.key, j->second.meta.peer);
  if (j->second.gather)
    st.gathered.give(*j->second.gather);
  if (auto p = st.peers.find(j->second.meta.peer); p != st.peers.end())
    std::erase(p->second.waiting, id);
  for (auto b = st.batches.begin(); b != st.batches.end();) {
    if (b->second.first != id) {
      ++b;
      continue;
    }
    if (!b->second.second && --st.kv_in_flight[room_peer] == 0)
      st.kv_in_flight.erase(room_peer);
    b = st.batches.erase(b);
  }
  st.jobs.erase(j);
}

/// Posts a job's KV plan and, on a last chunk, the states and aux row after
/// it. The job may be finished (and gone) when it returns.
void launch(self_ptr self, uint64_t id, write_plan plan) {
  auto& st = self->state;
  auto& j = st.jobs.at(id);
  bool with_tail = j.meta.last && (j.meta.src_aux != no_aux_slot || !j.meta.src_states.empty());
  if (with_tail) {
    // The stamp lets decode check that the row it commits is this room's.
    if (j.meta.src_aux != no_aux_slot)
      write_stamp(st.pool, j.meta.src_aux, j.meta.key);
    if (st.caps.ordered_writes) {
      // Ops land in order on this backend: states and the aux row ride last in the batch.
      if (auto rc = plan_tail(plan, st, j.meta); !rc.ok()) {
        fail_job(j, failure{errc::invalid_argument, rc.message(), st.self});
        finish(self, id);
        return;
      }
    } else {
      j.aux_waiting = true;
    }
  }
  if (!plan.ops.empty())
    post(self, id, std::move(plan), false);
  if (j.aux_waiting && !j.why && st.kv_in_flight.count({j.meta.key, j.meta.peer}) == 0)
    post_aux(self, id);
  if (j.pending == 0 && !j.aux_waiting)
    finish(self, id);
}

void pump_all(self_ptr self);

/// True if job `id` can no longer move on its own: nothing of it in flight,
/// nothing it waits for. Between two handlers no job is (it would have
/// finished); after a handler threw, the one it was working on may be.
bool stranded(const transfer_state& st, uint64_t id, const transfer_state::job& j) {
  if (j.pending > 0)
    return false;
  if (j.aux_waiting)
    return st.kv_in_flight.count({j.meta.key, j.meta.peer}) == 0;
  if (auto p = st.peers.find(j.meta.peer); !j.posted && p != st.peers.end()) {
    auto& waiting = p->second.waiting;
    if (std::find(waiting.begin(), waiting.end(), id) != waiting.end())
      return false;
  }
  return true;
}

/// A handler threw while handling `handling` (and job `job`, if it handles
/// one): the rooms it concerns fail at once, each of their jobs with the
/// chunk_result a failed write sends, naming the exception. Those rooms are
/// the room of `job`, of every job the throw left stranded, and of every job
/// it posted a batch for (cookies from `first_cookie` on: a post that threw
/// gets no completion). Their batches still in flight are forgotten (a late
/// completion is ignored); the rooms are failed, so their source pages may go
/// back once the rank has every result.
void fail_thrown(self_ptr self, const char* handling, std::optional<uint64_t> job,
                 uint64_t first_cookie, const std::string& what) {
  auto& st = self->state;
  log().error("[{}] exception while handling {}: {}; failing the rooms it concerns",
              to_string(st.self), handling, what);
  failure why{errc::internal, "exception in the transfer actor: " + what, st.self};
  std::set<room_key> rooms;
  if (job)
    if (auto j = st.jobs.find(*job); j != st.jobs.end())
      rooms.insert(j->second.meta.key);
  for (auto& [id, j] : st.jobs)
    if (stranded(st, id, j))
      rooms.insert(j.meta.key);
  for (auto b = st.batches.lower_bound(first_cookie); b != st.batches.end(); ++b)
    if (auto j = st.jobs.find(b->second.first); j != st.jobs.end())
      rooms.insert(j->second.meta.key);
  std::vector<uint64_t> failed;
  for (auto& [id, j] : st.jobs)
    if (rooms.count(j.meta.key))
      failed.push_back(id);
  for (auto id : failed) {
    auto& j = st.jobs.at(id);
    auto r = result_of(j);
    r.why = why;
    auto to = j.reply_to;
    abandon(self, id);
    ++st.counters->chunks;
    self->send(to, std::move(r));
  }
  // No job of these rooms is left to wait for their KV: a count the throw
  // left behind goes.
  std::erase_if(st.kv_in_flight, [&](const auto& kv) { return rooms.count(kv.first.first) > 0; });
}

/// What `f` threw, as text; nothing if it returned.
template <class F>
std::optional<std::string> caught(F&& f) {
  try {
    f();
    return std::nullopt;
  } catch (const std::exception& e) {
    return std::string{e.what()};
  } catch (...) {
    return std::string{"an exception of unknown type"};
  }
}

/// Runs `f`, the work of a handler of `handling` (of job `job`, if it has
/// one). What it throws never takes the actor (and every room of its rank)
/// down: the rooms it concerns fail at once (fail_thrown) and the actor
/// carries on.
template <class F>
void shielded(self_ptr self, const char* handling, std::optional<uint64_t> job, F f) {
  auto first_cookie = self->state.next_id;
  auto what = caught([&] {
    fire_planted_fault();
    f();
  });
  if (!what)
    return;
  fail_thrown(self, handling, job, first_cookie, *what);
  // What the failed jobs held (gather space, a place in a ring's order) may
  // let others go now. A throw here fails what it concerns too; no more is
  // tried until the next message.
  first_cookie = self->state.next_id;
  if (auto again = caught([&] { pump_all(self); }))
    fail_thrown(self, "the jobs behind the failed ones", std::nullopt, first_cookie, *again);
}

/// Posts the staged jobs that may go now, oldest first over every peer:
/// granted, their slot consumed by the ring's watermark, and gather space
/// free. A job that must wait holds back only the later chunks of its own
/// room to that peer (their order matters to the room's last chunk); other
/// rooms go past it. Once the oldest writable job finds no gather space, no
/// later job takes any, so a large chunk is not starved by smaller ones. This
/// cannot deadlock: the oldest space held in a ring is always writable, and
/// gather space comes back as writes complete.
void pump_all(self_ptr self) {
  auto& st = self->state;
  std::vector<std::pair<uint64_t, rank_ref>> order;
  for (auto& [rank, peer] : st.peers)
    for (auto id : peer.waiting)
      order.emplace_back(id, rank);
  std::sort(order.begin(), order.end());
  std::set<std::pair<rank_ref, room_key>> held_back;
  bool space_reserved = false;
  for (auto& [id, rank] : order) {
    auto p = st.peers.find(rank);
    auto jt = st.jobs.find(id);
    if (p == st.peers.end() || jt == st.jobs.end() || jt->second.posted)
      continue;  // finished meanwhile
    auto& peer = p->second;
    auto& j = jt->second;
    auto pos = std::find(peer.waiting.begin(), peer.waiting.end(), id);
    if (pos == peer.waiting.end())
      continue;
    auto room = std::make_pair(rank, j.meta.key);
    if (held_back.count(room))
      continue;
    if (j.meta.src_pages.empty()) {
      // A last chunk with no pages (its states and aux row only): it goes
      // once the room's earlier chunks went, with no ring write.
      peer.waiting.erase(pos);
      j.posted = true;
      launch(self, id, write_plan{});
      continue;
    }
    if (!j.grant || !may_write(j.grant->end, peer.staging.size, peer.consumed)) {
      held_back.insert(room);
      continue;
    }
    if (j.grant->offset > peer.staging.size ||
        j.staged_bytes > peer.staging.size - j.grant->offset ||
        j.grant->end < j.grant->offset + j.staged_bytes) {
      peer.waiting.erase(pos);
      fail_job(j,
               failure{errc::out_of_bounds,
                       "staging grant at ring offset " + std::to_string(j.grant->offset) + " for " +
                           std::to_string(j.staged_bytes) + " bytes exceeds the ring of " +
                           std::to_string(peer.staging.size) + " bytes of " + to_string(rank),
                       st.self});
      finish(self, id);
      continue;
    }
    auto at = space_reserved ? std::nullopt : st.gathered.take(j.staged_bytes);
    if (!at) {
      held_back.insert(room);
      space_reserved = true;
      continue;
    }
    peer.waiting.erase(pos);
    j.gather = *at;
    j.posted = true;
    auto copies = plan_gather(st.pool.layout, peer.layout, j.meta.src_pages);
    if (!copies.ok()) {
      fail_job(j, failure{errc::invalid_pages, copies.error().message(), st.self});
      finish(self, id);
      continue;
    }
    // Every piece checked against its KV buffer and the gather buffer.
    auto lists = segments_by_buffer(*copies, st.pool.kv_bases.size(), *at, true);
    std::span<std::byte> gather{st.staging.gather, st.staging.size};
    transport::status gathered;
    for (size_t b = 0; b < lists.size() && gathered.ok(); ++b)
      if (!lists[b].empty())
        gathered = st.pool.copy_segments(
            gather, {st.pool.kv_bases[b], st.pool.layout.kv_buffers[b].length}, lists[b]);
    if (!gathered.ok()) {
      fail_job(j,
               failure{errc::internal, "gathering a staged chunk: " + gathered.message(), st.self});
      finish(self, id);
      continue;
    }
    write_plan plan;
    plan.ops.push_back(
        {st.staging.region, *at, peer.staging.region, j.grant->offset, j.staged_bytes});
    plan.bytes = j.staged_bytes;
    launch(self, id, std::move(plan));
  }
}

/// A staged job that will not be posted: its room fails with `why`, and so
/// do the later chunks of the room to that peer still waiting behind it
/// (their writes would be wasted).
void drop_staged(self_ptr self, uint64_t id, failure why) {
  auto& st = self->state;
  auto j = st.jobs.find(id);
  if (j == st.jobs.end() || j->second.posted)
    return;  // finished, or already posted
  auto key = j->second.meta.key;
  std::vector<uint64_t> dropped{id};
  if (auto p = st.peers.find(j->second.meta.peer); p != st.peers.end()) {
    auto& waiting = p->second.waiting;
    auto at = std::find(waiting.begin(), waiting.end(), id);
    for (auto i = at; i != waiting.end(); ++i)
      if (*i != id && st.jobs.at(*i).meta.key == key)
        dropped.push_back(*i);
    std::erase_if(waiting, [&](uint64_t x) {
      return std::find(dropped.begin(), dropped.end(), x) != dropped.end();
    });
  }
  for (auto d : dropped) {
    fail_job(st.jobs.at(d), why);
    finish(self, d);
  }
}

/// Fails every job still waiting for `rank`'s ring.
void drop_waiting(self_ptr self, const rank_ref& rank, const failure& why) {
  auto p = self->state.peers.find(rank);
  if (p == self->state.peers.end())
    return;
  auto waiting = p->second.waiting;
  for (auto w : waiting)
    drop_staged(self, w, why);
}

/// Asks the peer's staging actor for ring space for a staged job.
void start_staged(self_ptr self, uint64_t id) {
  auto& st = self->state;
  auto& j = st.jobs.at(id);
  auto& peer = st.peers.at(j.meta.peer);
  auto pages = static_cast<uint32_t>(j.meta.src_pages.size());
  if (pages == 0) {
    // Nothing to stage; it only waits behind the room's earlier chunks.
    peer.waiting.push_back(id);
    pump_all(self);
    return;
  }
  j.staged = true;
  j.staged_bytes = staged_bytes(st.pool.layout, peer.layout, pages);
  if (j.staged_bytes == 0) {
    fail_job(
        j, failure{errc::invalid_argument,
                   "chunk " + std::to_string(j.meta.chunk) + " of " + to_string(j.meta.key) + ": " +
                       to_string(st.self) + " shares no head with " + to_string(j.meta.peer),
                   st.self});
    finish(self, id);
    return;
  }
  if (j.staged_bytes > st.staging.size) {
    fail_job(j, failure{errc::staging_oversized,
                        "chunk " + std::to_string(j.meta.chunk) + " of " + to_string(j.meta.key) +
                            " stages " + std::to_string(j.staged_bytes) +
                            " bytes, more than the gather buffer of " +
                            std::to_string(st.staging.size) + " bytes of " + to_string(st.self),
                        st.self});
    finish(self, id);
    return;
  }
  peer.waiting.push_back(id);
  staging_ask ask{j.meta.key, st.self, j.meta.chunk, j.meta.first_page, pages, j.staged_bytes};
  auto rank = j.meta.peer;
  self->request(peer.staging.handle, st.staging.slot_wait, std::move(ask))
      .then(
          [self, id, rank](staging_grant& g) {
            shielded(self, "a staging grant", id, [&] {
              auto& st = self->state;
              auto j = st.jobs.find(id);
              if (j == st.jobs.end())
                return;
              if (g.key != j->second.meta.key || g.chunk != j->second.meta.chunk) {
                drop_staged(self, id,
                            failure{errc::invalid_argument,
                                    "staging grant for chunk " + std::to_string(g.chunk) + " of " +
                                        to_string(g.key) + " answered the ask for chunk " +
                                        std::to_string(j->second.meta.chunk) + " of " +
                                        to_string(j->second.meta.key),
                                    st.self});
                pump_all(self);
                return;
              }
              j->second.grant = g;
              if (auto p = st.peers.find(rank); p != st.peers.end())
                p->second.consumed = std::max(p->second.consumed, g.consumed);
              pump_all(self);
            });
          },
          [self, id](caf::error& err) {
            shielded(self, "a refused staging ask", id, [&] {
              drop_staged(self, id, to_failure(err, self->state.self));
              pump_all(self);
            });
          });
  self->delayed_send(self, st.staging.slot_wait, expire_atom_v, id);
}

void on_job(self_ptr self, uint64_t id, chunk_job& job) {
  auto& st = self->state;
  auto& j = st.jobs[id];
  j.meta = std::move(job);
  j.reply_to = caf::actor_cast<prefill_rank_actor>(self->current_sender());
  auto peer = st.peers.find(j.meta.peer);
  if (peer == st.peers.end()) {
    auto why = st.unreachable.count(j.meta.peer) ? st.unreachable[j.meta.peer]
                                                 : std::string{"never registered"};
    fail_job(
        j, failure{errc::connect_failed,
                   "no data-plane connection to " + to_string(j.meta.peer) + ": " + why, st.self});
    finish(self, id);
    return;
  }
  if (peer->second.staging.offered() && !j.meta.src_pages.empty()) {
    start_staged(self, id);
    return;
  }
  auto plan = plan_kv(st.pool.layout, peer->second.layout, j.meta.src_pages, j.meta.dst_pages,
                      st.caps.max_write_bytes);
  if (!plan.ok()) {
    fail_job(j, failure{errc::invalid_pages, plan.error().message(), st.self});
    finish(self, id);
    return;
  }
  launch(self, id, std::move(plan).value());
}

void on_done(self_ptr self, batch_done& done) {
  auto& st = self->state;
  auto b = st.batches.find(done.cookie);
  if (b == st.batches.end())
    return;
  auto [id, is_aux] = b->second;
  st.batches.erase(b);
  auto& j = st.jobs.at(id);
  --j.pending;
  auto code = static_cast<transport::code>(done.code);
  if (code != transport::code::ok)
    fail_job(j, to_failure(transport::status::from(code, done.message), st.net->name(), j.meta.peer,
                           st.self));
  if (!is_aux && j.gather) {
    // The bulk write read its bytes: the gather space may serve another.
    st.gathered.give(*j.gather);
    j.gather.reset();
  }
  if (!is_aux) {
    auto k = std::make_pair(j.meta.key, j.meta.peer);
    if (--st.kv_in_flight[k] == 0) {
      st.kv_in_flight.erase(k);
      // A last chunk of this room waiting for its KV to land may post aux now.
      for (auto& [other_id, other] : st.jobs)
        if (other.aux_waiting && other.meta.key == j.meta.key && other.meta.peer == j.meta.peer) {
          if (other.why)
            other.aux_waiting = false;
          else
            post_aux(self, other_id);
          if (other.pending == 0 && !other.aux_waiting) {
            finish(self, other_id);
            break;
          }
        }
    }
  }
  if (st.jobs.count(id) && st.jobs.at(id).pending == 0 && !st.jobs.at(id).aux_waiting)
    finish(self, id);
  pump_all(self);
}

}  // namespace

transfer_actor::behavior_type transfer(transfer_actor::stateful_pointer<transfer_state> self,
                                       rank_ref rank, local_pool pool,
                                       std::shared_ptr<transport::transport> net,
                                       transfer_staging staging,
                                       std::shared_ptr<transfer_counters> counters) {
  auto& st = self->state;
  st.self = std::move(rank);
  st.pool = std::move(pool);
  st.net = std::move(net);
  st.staging = staging;
  st.counters = counters ? std::move(counters) : std::make_shared<transfer_counters>();
  st.gathered = gather_space{staging.gather ? staging.size : 0};
  st.caps = st.net->capabilities();
  // Completions arrive on the transport's threads; they become messages. The
  // handler holds the actor weakly: the transport lives inside this actor.
  caf::weak_actor_ptr weak = self->ctrl();
  st.net->set_completion_handler([weak](transport::completion c) {
    if (auto strong = weak.lock())
      caf::anon_send(
          caf::actor_cast<transfer_actor>(strong),
          batch_done{c.cookie, static_cast<uint8_t>(c.result.error_code()), c.result.message()});
  });
  return {
      [self](peer_connect& pc) {
        auto& st = self->state;
        auto id = st.net->connect(pc.endpoint, pc.credential);
        if (!id.ok()) {
          log().error("[{}] cannot connect the data plane to {} at {}: {}", to_string(st.self),
                      to_string(pc.peer), pc.endpoint, id.error().to_string());
          st.unreachable[pc.peer] = id.error().to_string();
          drop_waiting(self, pc.peer,
                       failure{errc::connect_failed,
                               "no data-plane connection to " + to_string(pc.peer) + ": " +
                                   id.error().to_string(),
                               st.self});
          st.peers.erase(pc.peer);
          return;
        }
        st.unreachable.erase(pc.peer);
        if (!st.staging.gather)
          pc.staging = staging_offer{};
        // Jobs still waiting for the previous incarnation's ring fail now.
        drop_waiting(self, pc.peer,
                     failure{errc::peer_down,
                             to_string(pc.peer) +
                                 " registered again while a staged chunk waited for its ring",
                             st.self});
        auto& peer = st.peers[pc.peer];
        peer = transfer_state::peer{*id, std::move(pc.layout), pc.staging, 0, {}};
      },
      [self](chunk_job& job) {
        auto key = job.key;
        auto peer = job.peer;
        auto chunk = job.chunk;
        auto id = self->state.next_id++;
        try {
          on_job(self, id, job);
        } catch (const std::exception& e) {
          // Never let one room's error take the actor down: fail that room.
          abandon(self, id);
          chunk_result r;
          r.key = key;
          r.peer = peer;
          r.chunk = chunk;
          r.why =
              failure{errc::internal, std::string{"exception in the transfer actor: "} + e.what(),
                      self->state.self};
          self->send(caf::actor_cast<prefill_rank_actor>(self->current_sender()), std::move(r));
        }
      },
      [self](batch_done& done) {
        auto& batches = self->state.batches;
        auto b = batches.find(done.cookie);
        auto job = b == batches.end() ? std::nullopt : std::optional<uint64_t>{b->second.first};
        shielded(self, "a batch completion", job, [&] { on_done(self, done); });
      },
      [self](staging_watermark& wm) {
        shielded(self, "a staging watermark", std::nullopt, [&] {
          // Only from the staging actor of the peer's current incarnation
          // (it names its decode rank by place).
          auto from = self->current_sender();
          for (auto& [rank, peer] : self->state.peers)
            if (same_place(rank, wm.ring) && from == peer.staging.handle.address() &&
                wm.consumed > peer.consumed) {
              peer.consumed = wm.consumed;
              pump_all(self);
            }
        });
      },
      [self](expire_atom, uint64_t id) {
        shielded(self, "a staging timer", id, [&] {
          auto& st = self->state;
          auto j = st.jobs.find(id);
          if (j == st.jobs.end() || !j->second.staged || j->second.posted)
            return;
          auto& job = j->second;
          std::string state = "no ring space granted";
          if (job.grant) {
            auto consumed = uint64_t{0};
            if (auto p = st.peers.find(job.meta.peer); p != st.peers.end())
              consumed = p->second.consumed;
            state = "its slot ends at " + std::to_string(job.grant->end) +
                    " and the ring was consumed up to " + std::to_string(consumed);
          }
          drop_staged(self, id,
                      failure{errc::deadline,
                              "staged chunk " + std::to_string(job.meta.chunk) + " of " +
                                  to_string(job.meta.key) + " to " + to_string(job.meta.peer) +
                                  " waited " + std::to_string(st.staging.slot_wait.count()) +
                                  " ms for its ring slot: " + state,
                              st.self});
          pump_all(self);
        });
      },
  };
}

}  // namespace kvferry
