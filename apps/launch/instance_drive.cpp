#include "apps/launch/instance_drive.hpp"

#include <algorithm>
#include <sstream>

#include <caf/scoped_actor.hpp>

#include "actors/metrics/process_figures.hpp"
#include "messages/type_ids.hpp"
#include "messages/wall_clock.hpp"

namespace kvferry::launch {

using clock_type = std::chrono::steady_clock;

/// The incarnation a rank reports (rank_report::generation): its instance's
/// generation as the runtime knows it. The one place to read a per-rank
/// generation from once the runtime has one.
uint64_t generation_of(const runtime& rt) {
  return rt.rank().instance_generation;
}

/// One report per hosted rank of `inst`, sent to the node's status actor.
void report_to(const status_actor& status, const running_instance& inst, const apps::run_report* r,
               uint32_t rooms, bool finished) {
  if (!status)
    return;
  std::vector<metric_family> figures;
  if (inst.report_metrics && inst.metrics)
    figures = inst.metrics->collect();
  for (size_t k = 0; k < inst.hosted.ranks.size(); ++k) {
    auto& rt = *inst.hosted.ranks[k];
    rank_report rep;
    rep.instance = inst.spec->name;
    rep.role = to_string(inst.spec->role);
    rep.index = inst.indices[k];
    rep.rank = to_string(rt.rank());
    rep.pid = static_cast<int32_t>(::getpid());
    rep.endpoint = rt.data_endpoint();
    rep.actor = inst.spec->role == instance_role::prefill
                    ? caf::actor_cast<caf::strong_actor_ptr>(rt.prefill())
                    : caf::actor_cast<caf::strong_actor_ptr>(rt.decode());
    rep.rooms = rooms;
    rep.finished = finished;
    rep.generation = generation_of(rt);
    rep.metrics = figures;
    if (r) {
      rep.opened = r->opened;
      rep.success = r->success;
      rep.failed = r->failed;
      rep.in_flight = r->now;
      for (auto& [code, n] : r->failures)
        rep.failures.push_back(code + ": " + std::to_string(n) + " rooms");
      for (auto& e : r->first_errors)
        rep.failures.push_back(e);
    }
    // As the rank itself: under TLS the status actor takes reports only from
    // processes of its node, and an anonymous message has no process.
    if (rep.actor) {
      auto as = caf::actor_cast<caf::actor>(rep.actor);
      caf::send_as(as, status, std::move(rep));
    } else {
      caf::anon_send(status, std::move(rep));
    }
  }
}

namespace {

std::string progress_line(const std::string& name, const apps::run_report& r) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(1);
  os << "progress: " << name << ": " << (r.success + r.failed) << "/" << r.rooms
     << " rooms concluded (" << r.success << " Success, " << r.failed << " Failed), in flight:";
  if (r.now.empty())
    os << " none";
  for (auto& [state, n] : r.now)
    os << " " << state << "=" << n;
  os << ", " << r.seconds << " s";
  return os.str();
}

/// A restarted process joins the work where its instance is, not where the
/// clock says (the clock runs ahead of an instance that waits for its peers):
/// a prefill rank opens the rooms of its share as decode ranks ask for them,
/// so that no room decode gave up on while it was away waits here alone; a
/// decode rank resumes at the first room its siblings had not opened (their
/// latest reports to the node's status actor), so that it opens every room
/// they open from now on, and the rooms they opened while it was away failed
/// at once (instance_incomplete) for everyone.
void rejoin_where_instance_is(const cluster_spec& c, const running_instance& inst,
                              const status_actor& status, apps::workload& w) {
  auto& ws = *c.workload;
  if (inst.spec->role == instance_role::prefill) {
    w.follow_requests = true;
    if (ws.requests_per_second > 0)
      w.serve_until_ns = std::max(
          w.serve_until_ns,
          w.epoch_ns + static_cast<int64_t>(ws.requests) * w.interval_us * 1000 + 3'000'000'000);
    return;
  }
  if (!status || inst.indices.size() != 1)
    return;  // a whole node restarted: a new incarnation, by the clock
  caf::scoped_actor self{status.home_system()};
  std::optional<uint32_t> at;
  self->request(status, std::chrono::seconds{2}, status_atom_v)
      .receive(
          [&](const node_status& ns) {
            for (auto& h : ns.ranks)
              if (h.last.instance == inst.spec->name && h.last.index != inst.indices.front() &&
                  h.up)
                at = std::max(at.value_or(0), h.last.opened);
          },
          [](const caf::error&) {});
  if (at)
    w.resume_at = *at;
}

}  // namespace

/// Drives the workload's rooms of `inst` on the ranks this process hosts.
void drive(const cluster_spec& c, const node_options& opts, int64_t epoch, running_instance& inst,
           const status_actor& status, printer& p) {
  auto& ws = *c.workload;
  apps::workload w;
  w.seed = ws.seed;
  w.min_tokens = ws.min_tokens;
  w.max_tokens = ws.max_tokens;
  w.chunk_pages = ws.chunk_pages;
  w.concurrency = ws.concurrency;
  w.first_room = 1;
  w.ids = c.rooms_of(*inst.spec);
  w.rooms = static_cast<uint32_t>(w.ids.size());
  if (ws.requests_per_second > 0) {
    w.interval_us = static_cast<uint32_t>(1e6 / ws.requests_per_second);
    // Without a shared origin, count from a moment ahead (the driver starts
    // after this): nothing is skipped.
    w.epoch_ns = epoch != 0 ? epoch : wall_ns() + 100'000'000;
  }
  w.record_conclusions = opts.print_conclusions;
  if (opts.restarted)
    rejoin_where_instance_is(c, inst, status, w);
  auto last_line = clock_type::now();
  auto name = inst.spec->name;
  if (!opts.rank.empty())
    name = opts.rank;
  w.on_progress = [&, name](const apps::run_report& r) {
    report_to(status, inst, &r, w.rooms, false);
    if (clock_type::now() - last_line >= ws.progress) {
      last_line = clock_type::now();
      p.line(progress_line(name, r));
    }
  };
  if (inst.spec->role == instance_role::prefill) {
    // The prefill half of the router: where a decode instance can send this
    // instance's rooms elsewhere, rooms of its share are not opened while it
    // is dead, and rooms re-routed here are opened as they are asked for.
    for (auto& d : c.instances)
      if (d.role == instance_role::decode && d.prefills.size() > 1 &&
          std::find(d.prefills.begin(), d.prefills.end(), inst.spec->name) != d.prefills.end())
        w.serve_rerouted = true;
    if (w.serve_rerouted && ws.requests_per_second > 0)
      w.serve_until_ns =
          w.epoch_ns + static_cast<int64_t>(ws.requests) * w.interval_us * 1000 + 3'000'000'000;
    inst.report = apps::drive_prefill(inst.hosted.view(), w);
  } else {
    auto where_of = [&c](uint64_t room) { return bootstrap_of(c, *c.source_of(room)); };
    // A router: a room whose prefill instance its ranks know down goes to the
    // next one of the instance's list that is not (back to the first as soon
    // as it is up again). Only where one driver drives every rank of the
    // instance: per-rank children decide alone, and the ranks of one room
    // must all name the same prefill instance.
    if (inst.hosted.ranks.size() == size_t{inst.spec->tp} * inst.spec->pp &&
        inst.spec->prefills.size() > 1)
      w.route = [&c, &inst](uint64_t, const bootstrap_locator& planned) {
        // Routed around only once its bootstrap recorded it dead: then its
        // own drivers know too and open none of its rooms. A rank lost by
        // heartbeats alone (frozen) keeps its rooms, which fail at once on
        // every rank (both sides hear the verdict) until it answers again.
        auto down = [&](const bootstrap_locator& b) {
          for (auto& r : inst.hosted.ranks)
            if (auto why = r->prefill_down(b); why && why->code == errc::instance_dead)
              return true;
          return false;
        };
        if (!down(planned))
          return planned;
        for (auto& name : inst.spec->prefills)
          if (auto* pi = c.find_instance(name)) {
            auto b = bootstrap_of(c, *pi);
            if (b.key() != planned.key() && !down(b))
              return b;
          }
        return planned;
      };
    inst.report = apps::drive_decode(inst.hosted.view(), w, where_of);
  }
  report_to(status, inst, &*inst.report, w.rooms, true);
  std::string text = name + " " + inst.report->to_text(to_string(inst.spec->role));
  for (auto& cn : inst.report->conclusions)
    text += "\nconclusion " + to_string(inst.hosted.ranks[cn.rank]->rank()) + " room " +
            std::to_string(cn.room) + " " + to_string(cn.state) + " " + std::to_string(cn.at_ns) +
            " " + (cn.why.empty() ? "-" : cn.why);
  p.line(text);
}

}  // namespace kvferry::launch
