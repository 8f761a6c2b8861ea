#include "apps/launch/rank_children.hpp"

#include <algorithm>
#include <string_view>
#include <thread>

#include <unistd.h>

#include <caf/scoped_actor.hpp>

#include "actors/base/log_json.hpp"
#include "apps/launch/stop_signals.hpp"
#include "messages/type_ids.hpp"

namespace kvferry::launch {

using clock_type = std::chrono::steady_clock;

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
void spawn(rank_child& ch, bool again) {
  auto args = ch.argv;
  if (again && std::find(args.begin(), args.end(), "--restarted") == args.end())
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
                    uint16_t status_port, int64_t epoch, const instance_spec& s,
                    uint16_t decider_port, std::vector<rank_child>& out, printer& p,
                    std::ostream& err) {
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
    if (decider_port != 0)
      argv.push_back("--decider-port=" + std::to_string(decider_port));
    if (opts.print_conclusions)
      argv.push_back("--print-conclusions");
    // A prefill instance on a node that was restarted is a new incarnation
    // that the decode side failed rooms of while it was away: its ranks open
    // the rooms they are asked for, as a restarted rank does and as one
    // process of the whole node does (instance_drive.cpp), not every room
    // the clock says, which nobody would ask for and which would each hold
    // a slot for a bootstrap deadline.
    if (opts.restarted && s.role == instance_role::prefill)
      argv.push_back("--restarted");
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
      err << c.file << ":" << s.line << ": "
          << "rank " << name << " of node \"" << node.name << "\" did not come up ("
          << exit_reason(ch.rc) << ")\n";
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

}  // namespace kvferry::launch
