#include "apps/launch/node_runner.hpp"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <sstream>
#include <thread>
#include <vector>

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <caf/io/middleman.hpp>

#include "actors/base/log.hpp"
#include "actors/base/log_json.hpp"
#include "actors/bootstrap/bootstrap_actor.hpp"
#include "actors/decision/decider_actor.hpp"
#include "actors/facade/runtime.hpp"
#include "actors/gateway/tls.hpp"
#include "actors/metrics/process_figures.hpp"
#include "actors/process/caf_port_guard.hpp"
#include "apps/common/child_process.hpp"
#include "apps/common/host_pool.hpp"
#include "apps/common/hosted_ranks.hpp"
#include "apps/common/scheduler_driver.hpp"
#include "apps/common/whole_lines.hpp"
#include "apps/launch/http_endpoint.hpp"
#include "apps/launch/node_metrics.hpp"
#include "apps/launch/status_actor.hpp"
#include "apps/launch/supervision.hpp"
#include "messages/type_ids.hpp"
#include "messages/wall_clock.hpp"

namespace kvferry::launch {

namespace {

using clock_type = std::chrono::steady_clock;

std::string at(const cluster_spec& c, uint32_t line) {
  return c.file + ":" + std::to_string(line) + ": ";
}

/// The ranks of one instance this process hosts (all of them per node, one
/// in a per-rank child, none in a per-rank node process).
struct running_instance {
  const instance_spec* spec = nullptr;
  apps::hosted_ranks hosted;
  std::vector<uint32_t> indices;  // of the hosted ranks
  bootstrap_actor boot;           // prefill, in the node process
  decider_actor dec;              // decode, in the node process
  uint16_t decider_port = 0;      // decode, per-rank: where the children find it
  std::optional<apps::run_report> report;
  /// This process's figures for Prometheus (one registry per process).
  std::shared_ptr<metrics::registry> metrics;
  /// A per-rank child: its reports carry its figures to the node.
  bool report_metrics = false;

  void stop() {
    hosted.stop();
    if (dec)
      caf::anon_send_exit(dec, caf::exit_reason::kill);
    if (boot)
      caf::anon_send_exit(boot, caf::exit_reason::kill);
  }
};

/// The lines the drivers' threads print: each line whole (one write), so
/// that neither another thread's line nor a log line lands inside it.
struct printer {
  std::ostream& out;
  void line(const std::string& text) {
    if (&out == &std::cout) {
      out.flush();
      apps::say(text);
      return;
    }
    static std::mutex mu;  // another stream (a test's): serialized, as one text
    std::lock_guard<std::mutex> guard{mu};
    out << text << std::endl;
  }
};

bootstrap_locator bootstrap_of(const cluster_spec& c, const instance_spec& prefill) {
  return bootstrap_locator{{}, c.find_node(prefill.node)->host, prefill.bootstrap_port};
}

/// Spawns and publishes the bootstrap (prefill) or spawns the decider
/// (decode; published too when its ranks live in child processes).
bool start_coordinator(caf::actor_system& sys, const cluster_spec& c, const node_spec& node,
                       bool per_rank, running_instance& inst, printer& p, std::ostream& err) {
  auto& s = *inst.spec;
  if (s.role == instance_role::prefill) {
    inst.boot = sys.spawn(bootstrap_on, s.name, fresh_generation(),
                          node.host + ":" + std::to_string(s.bootstrap_port), node.name);
    auto port = publish_actor(sys, inst.boot, s.bootstrap_port, node.host);
    if (!port) {
      err << at(c, s.bootstrap_port_line) << "bootstrap_port = " << s.bootstrap_port
          << " of instance \"" << s.name << "\": cannot listen on " << node.host << ":"
          << s.bootstrap_port << " (" << sys.render(port.error())
          << "); expected a free port on this host\n";
      return false;
    }
    p.line("bootstrap of " + s.name + " listening on " + node.host + ":" + std::to_string(*port));
    return true;
  }
  inst.dec = sys.spawn(decider_on, s.name, s.tp, s.pp, fresh_generation(), c.limits, node.name,
                       inst.metrics);
  if (per_rank) {
    auto port = publish_actor(sys, inst.dec, 0, node.host);
    if (!port) {
      err << at(c, node.line) << "node \"" << node.name << "\": cannot publish the decider of \""
          << s.name << "\" on " << node.host << " (" << sys.render(port.error()) << ")\n";
      return false;
    }
    inst.decider_port = *port;
  }
  return true;
}

/// Starts the ranks `indices` of `inst` in this process.
bool start_ranks_here(caf::actor_system& sys, const cluster_spec& c, const node_spec& node,
                      const node_options& opts, running_instance& inst, printer& p,
                      std::ostream& err) {
  auto& s = *inst.spec;
  auto ws = c.workload.value_or(workload_spec{});
  apps::ranks_spec spec;
  spec.side = s.role == instance_role::prefill ? role::prefill : role::decode;
  spec.instance = s.name;
  spec.tp = s.tp;
  spec.pp = s.pp;
  spec.hosted = {inst.indices.begin(), inst.indices.end()};
  // The parser admitted only known names.
  spec.shape = apps::shape_named(ws.model).value_or(apps::llama_7b());
  spec.page_size = ws.page_size;
  spec.pool_pages = ws.pool_pages;
  spec.aux_rows = ws.aux_rows;
  spec.transport = c.transport;
  spec.listen_host = node.host;
  spec.first_data_port = s.data_port;
  spec.limits = c.limits;
  spec.staging = c.staging;
  spec.checksum = s.checksum;
  spec.metrics = inst.metrics;
  if (s.role == instance_role::prefill)
    spec.bootstrap = bootstrap_of(c, s);
  else if (inst.dec)
    spec.decider = decider_locator{inst.dec, "", 0};
  else
    spec.decider = decider_locator{{}, node.host, opts.decider_port};
  auto made = apps::start_ranks(sys, spec);
  if (!made) {
    err << at(c, s.data_port != 0 ? s.data_port_line : s.line) << "instance \"" << s.name
        << "\" rank did not start: " << sys.render(made.error()) << "\n";
    return false;
  }
  inst.hosted = std::move(*made);
  std::string endpoints;
  for (auto& r : inst.hosted.ranks)
    endpoints += (endpoints.empty() ? "" : ", ") + r->data_endpoint();
  p.line(s.name + ": " + to_string(s.role) + " TP " + std::to_string(s.tp) + " x PP " +
         std::to_string(s.pp) + ", " + std::to_string(inst.hosted.ranks.size()) +
         (inst.hosted.ranks.size() == 1 ? " rank" : " ranks") + " here on " + c.transport + " (" +
         endpoints + ")");
  return true;
}

/// Waits until something accepts TCP connections at host:port (a decode node
/// may start before its prefill node); false after `timeout`.
bool wait_reachable(const std::string& host, uint16_t port, std::chrono::nanoseconds timeout) {
  auto until = clock_type::now() + timeout;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  auto service = std::to_string(port);
  do {
    addrinfo* found = nullptr;
    if (getaddrinfo(host.c_str(), service.c_str(), &hints, &found) == 0) {
      bool ok = false;
      for (auto* a = found; a && !ok; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (fd < 0)
          continue;
        ok = connect(fd, a->ai_addr, a->ai_addrlen) == 0;
        close(fd);
      }
      freeaddrinfo(found);
      if (ok)
        return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds{200});
  } while (clock_type::now() < until);
  return false;
}

/// Waits up to `timeout` for SIGINT or SIGTERM (blocked by block_stop_signals());
/// true when one came.
bool took_signal(std::chrono::milliseconds timeout) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  timespec ts{static_cast<time_t>(timeout.count() / 1000),
              static_cast<long>(timeout.count() % 1000) * 1'000'000};
  return sigtimedwait(&set, nullptr, &ts) > 0;
}

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

/// A per-rank child of this node process, and how to start it again.
struct rank_child {
  std::string name;  // INSTANCE/INDEX
  std::string instance;
  uint32_t index = 0;
  std::vector<std::string> argv;
  std::unique_ptr<apps::child_process> proc;
  size_t printed = 0;
  bool done = false;
  int rc = -1;
  restart_tracker restarts;
  std::optional<clock_type::time_point> restart_at;  // a restart is due then
};

/// Prints what the child printed since last time, each line prefixed.
void relay(rank_child& ch, printer& p, bool all) {
  auto& text = ch.proc->output();
  auto end = all ? text.size() : text.rfind('\n') + 1;
  if (!all && text.rfind('\n') == std::string::npos)
    return;
  while (ch.printed < end) {
    auto nl = text.find('\n', ch.printed);
    auto stop = nl == std::string::npos || nl >= end ? end : nl;
    p.line(relayed_line(ch.name, std::string_view{text}.substr(ch.printed, stop - ch.printed)));
    ch.printed = stop + 1;
  }
  ch.printed = std::max(ch.printed, end);
}

/// (Re)starts the process of `ch` with its argv (`again`: a restart, which
/// joins the work where its instance is).
void spawn(rank_child& ch, bool again = false) {
  auto args = ch.argv;
  if (again)
    args.push_back("--restarted");
  ch.proc = std::make_unique<apps::child_process>(args);
  ch.printed = 0;
  ch.restarts.started = clock_type::now();
  ch.restart_at.reset();
}

/// Starts one child per rank of `inst`; false (children so far kept) when
/// one did not come up. A child that does not come up the first time is not
/// restarted: the node fails, as a node whose ranks do not start does.
bool start_children(const cluster_spec& c, const node_spec& node, const node_options& opts,
                    uint16_t status_port, int64_t epoch, running_instance& inst,
                    std::vector<rank_child>& out, printer& p, std::ostream& err) {
  auto& s = *inst.spec;
  for (uint32_t k = 0; k < s.tp * s.pp; ++k) {
    auto name = s.name + "/" + std::to_string(k);
    std::vector<std::string> argv{opts.exe,
                                  "--cluster=" + opts.cluster_path,
                                  "--node=" + node.name,
                                  "--rank=" + name,
                                  "--status-port=" + std::to_string(status_port),
                                  "--parent-pid=" + std::to_string(::getpid()),
                                  "--kvferry.log-level=" + opts.log_level,
                                  "--log-format=" + opts.log_format,
                                  "--exit-with-parent"};
    if (epoch != 0)
      argv.push_back("--epoch-ns=" + std::to_string(epoch));
    if (inst.decider_port != 0)
      argv.push_back("--decider-port=" + std::to_string(inst.decider_port));
    if (opts.print_conclusions)
      argv.push_back("--print-conclusions");
    auto& ch = out.emplace_back();
    ch.name = name;
    ch.instance = s.name;
    ch.index = k;
    ch.argv = std::move(argv);
    ch.restarts.policy = node.restart;
    spawn(ch);
    auto want = "rank " + name + " up";
    auto up = ch.proc->wait_for_line(
        [&](const std::string& l) { return l.find(want) != std::string::npos; },
        std::chrono::seconds{30});
    relay(ch, p, false);
    if (!up) {
      ch.rc = ch.proc->wait(std::chrono::seconds{2});
      relay(ch, p, true);
      ch.done = true;
      err << at(c, s.line) << "rank " << name << " of node \"" << node.name
          << "\" did not come up (" << exit_reason(ch.rc) << ")\n";
      return false;
    }
  }
  return true;
}

/// A child has exited: restarts it by the node's policy when it crashed
/// (supervision.hpp says how a crash is told from a finished workload), or
/// counts it as done. Tells the node's status actor about every abnormal exit.
void child_exited(rank_child& ch, const status_actor& status, printer& p) {
  ch.rc = ch.proc->wait(std::chrono::seconds{10});
  relay(ch, p, true);
  bool finished = ch.proc->output().find(done_line("rank " + ch.name)) != std::string::npos;
  auto reason = exit_reason(ch.rc);
  auto delay = crashed(ch.rc, finished) ? ch.restarts.next() : std::nullopt;
  if (delay) {
    p.line("rank " + ch.name + " exited (" + reason + "); " + ch.restarts.what(*delay));
    ch.restart_at = clock_type::now() + *delay;
  } else {
    ch.done = true;
    if (crashed(ch.rc, finished) && ch.restarts.policy.on())
      p.line("rank " + ch.name + " exited (" + reason + "); not restarted: restart_limit " +
             std::to_string(ch.restarts.policy.limit) + " reached");
    else
      p.line("rank " + ch.name + " exited with " + std::to_string(ch.rc));
  }
  // Abnormal: a signal, or a non-zero exit before the workload finished (1
  // after it is a result: some rooms failed, and the report says which).
  bool abnormal = ch.rc > 128 || ch.rc < 0 || (ch.rc != 0 && !finished);
  if (status && abnormal) {
    caf::scoped_actor self{status.home_system()};  // a sender of this process (see report_to)
    self->send(status, rank_exit{ch.instance, ch.index, ch.proc->pid(), reason,
                                 ch.restarts.restarts, delay.has_value()});
  }
}

/// Relays the children's output and restarts those that crash, until each
/// has exited for good (with a workload; the OR of their codes) or until
/// SIGINT or SIGTERM (`serving`, no workload; 0). Always ends: a child is
/// restarted at most restart_limit times, then counts as failed.
int supervise_children(std::vector<rank_child>& children, bool serving, const status_actor& status,
                       printer& p) {
  for (;;) {
    size_t left = 0;
    bool waited = false;
    for (auto& ch : children) {
      if (ch.done)
        continue;
      ++left;
      if (ch.restart_at) {
        if (clock_type::now() >= *ch.restart_at)
          spawn(ch, true);
        continue;
      }
      ch.proc->wait_for_line([](const std::string&) { return false; },
                             std::chrono::milliseconds{20});
      waited = true;
      relay(ch, p, false);
      if (ch.proc->exited())
        child_exited(ch, status, p);
    }
    if (serving) {
      if (took_signal(std::chrono::milliseconds{waited ? 0 : 20}))
        return 0;
    } else if (left == 0) {
      break;
    } else if (!waited) {
      std::this_thread::sleep_for(std::chrono::milliseconds{20});
    }
  }
  int rc = 0;
  for (auto& ch : children)
    rc |= ch.rc == 0 ? 0 : 1;
  return rc;
}

/// Serves the ranks of `insts` until SIGINT or SIGTERM; reports an
/// instance's ranks again when their generation changed (it may be issued
/// after they started), and every second where the reports carry the
/// process's figures (a per-rank child).
void serve(const std::vector<const running_instance*>& insts, const status_actor& status) {
  auto generations = [](const running_instance& inst) {
    std::vector<uint64_t> out;
    for (auto& r : inst.hosted.ranks)
      out.push_back(generation_of(*r));
    return out;
  };
  std::vector<std::vector<uint64_t>> seen;
  for (auto* i : insts)
    seen.push_back(generations(*i));
  while (!took_signal(std::chrono::seconds{1}))
    for (size_t k = 0; k < insts.size(); ++k)
      if (auto now = generations(*insts[k]); now != seen[k] || insts[k]->report_metrics) {
        seen[k] = std::move(now);
        report_to(status, *insts[k], nullptr, 0, false);
      }
}

/// --linger: the workload is done; status and /metrics stay up until
/// SIGINT or SIGTERM.
void linger(const std::string& node, printer& p) {
  p.line("node " + node + " lingers: status and metrics stay up; SIGINT or SIGTERM stops it");
  while (!took_signal(std::chrono::seconds{1})) {
  }
}

/// A per-rank child: hosts rank opts.rank of its instance, reports to the
/// node's status actor, drives the rank's share of the workload.
int run_rank_child(caf::actor_system& sys, const cluster_spec& c, const node_spec& node,
                   const node_options& opts, printer& p, std::ostream& err) {
  auto slash = opts.rank.rfind('/');
  auto* s = slash == std::string::npos ? nullptr : c.find_instance(opts.rank.substr(0, slash));
  if (!s || s->node != node.name) {
    err << c.file << ": --rank=" << opts.rank << " names no instance of node " << node.name
        << "; expected INSTANCE/INDEX\n";
    return 2;
  }
  running_instance inst;
  inst.spec = s;
  inst.indices = {static_cast<uint32_t>(std::stoul(opts.rank.substr(slash + 1)))};
  inst.metrics = std::make_shared<metrics::registry>();
  inst.report_metrics = true;
  metrics::watch_process(*inst.metrics, {{"node", node.name}, {"process", opts.rank}});
  watch_caf_ports(*inst.metrics, {{"node", node.name}, {"process", opts.rank}});
  if (!c.workload)
    block_stop_signals();  // main() did it before CAF's threads; again does no harm
  status_actor status;
  if (opts.parent_status_port != 0) {
    auto found = find_published<status_actor>(sys, node.host, opts.parent_status_port,
                                              std::chrono::seconds{10});
    if (found)
      status = *found;
    else
      err << "kvferry-launch: rank " << opts.rank << ": no status actor at " << node.host << ":"
          << opts.parent_status_port << " (" << sys.render(found.error()) << ")\n";
  }
  int rc = 0;
  try {
    if (!start_ranks_here(sys, c, node, opts, inst, p, err))
      return 1;
    report_to(status, inst, nullptr, 0, false);
    p.line("rank " + opts.rank + " up on " + inst.hosted.ranks.front()->data_endpoint() + " (pid " +
           std::to_string(::getpid()) + ")");
    if (c.workload) {
      drive(c, opts, opts.epoch_ns, inst, status, p);
      rc = inst.report->ok() ? 0 : 1;
      // Tells the node process this exit is the workload's result, not a
      // crash (supervision.hpp).
      p.line(done_line("rank " + opts.rank));
    } else {
      serve({&inst}, status);
    }
  } catch (const std::exception& e) {
    err << "kvferry-launch: rank " << opts.rank << ": " << e.what() << "\n";
    rc = 1;
  }
  inst.stop();
  return rc;
}

}  // namespace

void block_stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int run_node(caf::actor_system& sys, const cluster_spec& c, const std::string& node,
             const node_options& opts, std::ostream& out, std::ostream& err) {
  auto* n = c.find_node(node);
  if (!n) {
    std::string known;
    for (auto& k : c.nodes)
      known += (known.empty() ? "" : ", ") + k.name;
    err << c.file << ": --node=" << node << " names no [[node]] of the file; expected one of "
        << known << "\n";
    return 2;
  }
  printer p{out};
  if (!opts.rank.empty())
    return run_rank_child(sys, c, *n, opts, p, err);
  auto mode = opts.processes.value_or(c.processes_of(*n));
  bool per_rank = mode == process_mode::per_rank;
  // Prefill first, so a node that hosts both serves its own decode.
  std::vector<running_instance> insts;
  std::vector<std::string> expected;
  for (auto r : {instance_role::prefill, instance_role::decode})
    for (auto& i : c.instances)
      if (i.node == node && i.role == r) {
        auto& ri = insts.emplace_back();
        ri.spec = &i;
        for (uint32_t k = 0; k < i.tp * i.pp; ++k) {
          expected.push_back(i.name + "/" + std::to_string(k));
          if (!per_rank)
            ri.indices.push_back(k);
        }
      }
  if (insts.empty()) {
    err << at(c, n->line) << "node \"" << node << "\" runs no [[instance]]\n";
    return 2;
  }
  if (!c.workload)
    block_stop_signals();      // main() did it before CAF's threads; again does no harm
  auto epoch = opts.epoch_ns;  // 0: each driving process counts from its own start
  auto figures = std::make_shared<metrics::registry>();
  metrics::watch_process(*figures, {{"node", node}, {"process", "node " + node}});
  watch_caf_ports(*figures, {{"node", node}, {"process", "node " + node}});
  for (auto& i : insts)
    i.metrics = figures;
  auto metrics_at =
      n->metrics_port == 0 ? std::string{} : n->host + ":" + std::to_string(n->metrics_port);
  auto status =
      sys.spawn(node_status_actor, node, std::string{to_string(mode)}, expected, metrics_at);
  auto status_port = publish_actor(sys, status, n->status_port, n->host);
  if (!status_port) {
    err << at(c, n->status_port_line ? n->status_port_line : n->line)
        << "status_port = " << n->status_port << " of node \"" << node << "\": cannot listen on "
        << n->host << ":" << n->status_port << " (" << sys.render(status_port.error())
        << "); expected a free port on this host\n";
    caf::anon_send_exit(status, caf::exit_reason::kill);
    return 1;
  }
  p.line("status of node " + node + " listening on " + n->host + ":" +
         std::to_string(*status_port) + " (" + to_string(mode) + " processes)");
  std::unique_ptr<http_endpoint> metrics_endpoint;
  if (n->metrics_port != 0) {
    auto ep = http_endpoint::start(n->host, n->metrics_port, [&sys, status, figures] {
      return node_metrics(sys, status, *figures);
    });
    if (!ep) {
      err << at(c, n->metrics_port_line) << "metrics_port = " << n->metrics_port << " of node \""
          << node << "\": " << sys.render(ep.error()) << "\n";
      caf::anon_send_exit(status, caf::exit_reason::kill);
      return 1;
    }
    metrics_endpoint = std::move(*ep);
    p.line("metrics of node " + node + " at http://" + metrics_at + "/metrics");
  }
  int rc = 0;
  std::vector<rank_child> children;
  try {
    for (auto& i : insts) {
      if (!start_coordinator(sys, c, *n, per_rank, i, p, err) ||
          (!per_rank && !start_ranks_here(sys, c, *n, opts, i, p, err))) {
        rc = 1;
        break;
      }
      if (!per_rank)
        report_to(status, i, nullptr, 0, false);
    }
    for (auto& i : insts)
      if (rc == 0 && i.spec->role == instance_role::decode)
        for (auto& name : i.spec->prefills) {
          auto* pi = c.find_instance(name);
          auto where = bootstrap_of(c, *pi);
          if (!wait_reachable(where.host, where.port, c.limits.bootstrapping)) {
            err << at(c, pi->bootstrap_port_line) << "the bootstrap of \"" << pi->name << "\" at "
                << where.host << ":" << where.port << " did not answer within the bootstrap "
                << "deadline; expected its node to be running\n";
            rc = 1;
          }
        }
    if (rc == 0 && per_rank && epoch == 0 && n->restart.on() && c.workload &&
        c.workload->requests_per_second > 0) {
      // A restarted child must count from the origin of the one it replaces,
      // and skip the rooms whose time has passed: fix one for all children,
      // ahead of their starts (supervision.hpp). Without restarts each child
      // keeps its own, as before.
      size_t ranks = 0;
      for (auto& i : insts)
        ranks += i.spec->tp * i.spec->pp;
      epoch = wall_ns() + origin_lead(ranks).count();
    }
    if (rc == 0 && per_rank)
      for (auto& i : insts)
        if (!start_children(c, *n, opts, *status_port, epoch, i, children, p, err)) {
          rc = 1;
          break;
        }
    if (rc == 0 && per_rank) {
      if (!c.workload)
        p.line("node " + node + " serving; SIGINT or SIGTERM stops it");
      rc = supervise_children(children, !c.workload, status, p);
      if (c.workload)
        p.line(done_line("node " + node));
      if (c.workload && opts.linger)
        linger(node, p);
    } else if (rc == 0 && c.workload) {
      std::vector<std::thread> drivers;
      for (auto& i : insts)
        drivers.emplace_back([&, ip = &i] { drive(c, opts, epoch, *ip, status, p); });
      for (auto& d : drivers)
        d.join();
      for (auto& i : insts)
        rc |= i.report->ok() ? 0 : 1;
      p.line(done_line("node " + node));  // for --local's supervision (supervision.hpp)
      if (opts.linger)
        linger(node, p);
    } else if (rc == 0) {
      p.line("node " + node + " serving; SIGINT or SIGTERM stops it");
      std::vector<const running_instance*> here;
      for (auto& i : insts)
        here.push_back(&i);
      serve(here, status);
    }
  } catch (const std::exception& e) {
    err << "kvferry-launch: node " << node << ": " << e.what() << "\n";
    rc = 1;
  }
  // Children that run now (not those waiting for a restart: reaped already).
  for (auto& ch : children)
    if (!ch.done && !ch.restart_at)
      ::kill(ch.proc->pid(), SIGTERM);
  for (auto& ch : children)
    if (!ch.done && !ch.restart_at) {
      ch.proc->wait(std::chrono::seconds{10});
      relay(ch, p, true);
    }
  for (auto& i : insts)
    i.stop();
  caf::anon_send_exit(status, caf::exit_reason::kill);
  return rc;
}

}  // namespace kvferry::launch
