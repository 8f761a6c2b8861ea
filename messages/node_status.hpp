// What kvferry-ctl reads from a running node: the node's status actor (one
// per kvferry-launch node process, published on the node's status port)
// gathers one report per hosted rank, pushed by whoever drives that rank (the
// node's own process, or its per-rank child processes), and answers
// status_atom with all of them. A node process that runs its ranks as child
// processes also tells its status actor when one of them exited, and whether
// it is being restarted (rank_exit).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <caf/actor_control_block.hpp>
#include <caf/atom.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "messages/ids.hpp"
#include "messages/metric_family.hpp"

namespace kvferry {

using status_atom = caf::atom_constant<caf::atom("status")>;
constexpr status_atom status_atom_v{};

/// One rank as the process that hosts it sees it, pushed every progress
/// period and once at the end.
struct rank_report {
  std::string instance;
  std::string role;             ///< "prefill" or "decode"
  uint32_t index = 0;           ///< tp + pp * tp size
  std::string rank;             ///< rank_ref rendered ("decode-0 tp1 pp0")
  int32_t pid = 0;              ///< the process hosting it
  std::string endpoint;         ///< its data plane endpoint
  caf::strong_actor_ptr actor;  ///< its rank actor: the status actor monitors it
  uint32_t rooms = 0;           ///< rooms its scheduler will open (0: no workload)
  uint32_t opened = 0;          ///< rooms of its share opened so far, in order
  uint32_t success = 0;
  uint32_t failed = 0;
  std::map<std::string, uint32_t> in_flight;  ///< rooms open now, by state
  std::vector<std::string> failures;          ///< the latest failures, with causes
  bool finished = false;                      ///< its workload is done
  /// The incarnation of the rank that reports: today the instance generation
  /// of its rank_ref (0 while none was issued to it). A per-rank generation,
  /// once the runtime has one, goes here as well (filled in one place:
  /// generation_of() in apps/launch/node_runner.cpp).
  uint64_t generation = 0;
  /// A per-rank child process: its figures for Prometheus, as it collected
  /// them for this report (the node's /metrics serves them). Empty from a
  /// node's own process, whose figures the node reads itself.
  std::vector<metric_family> metrics;

  friend bool operator==(const rank_report&, const rank_report&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, rank_report& x) {
  return f(caf::meta::type_name("kvferry.rank_report"), x.instance, x.role, x.index, x.rank, x.pid,
           x.endpoint, x.actor, x.rooms, x.opened, x.success, x.failed, x.in_flight, x.failures,
           x.finished, x.generation, x.metrics);
}

/// A node process to its own status actor: a per-rank child process exited
/// abnormally (a signal, or a non-zero exit before its workload finished),
/// and whether the launcher restarts it (the cluster file's restart policy).
struct rank_exit {
  std::string instance;
  uint32_t index = 0;
  int32_t pid = 0;          ///< the process that exited
  std::string reason;       ///< "killed by signal 9", "exit code 3"
  uint32_t restarts = 0;    ///< restarts of this rank so far, the one now scheduled included
  bool restarting = false;  ///< false: the policy is never, or its restart_limit was reached

  friend bool operator==(const rank_exit&, const rank_exit&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, rank_exit& x) {
  return f(caf::meta::type_name("kvferry.rank_exit"), x.instance, x.index, x.pid, x.reason,
           x.restarts, x.restarting);
}

/// A rank in a node's answer: its latest report, whether it is up, and what
/// the node's supervision of its process saw (per-rank processes only).
struct rank_health {
  rank_report last;
  bool up = true;
  std::string down_reason;  ///< why it is down (its actor terminated: the exit reason)
  uint32_t restarts = 0;    ///< times its process was restarted
  std::string last_exit;    ///< why its process last exited abnormally ("" never)
  bool given_up = false;    ///< its process exited and is not restarted again

  friend bool operator==(const rank_health&, const rank_health&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, rank_health& x) {
  return f(caf::meta::type_name("kvferry.rank_health"), x.last, x.up, x.down_reason, x.restarts,
           x.last_exit, x.given_up);
}

/// A node's answer to status_atom.
struct node_status {
  std::string node;
  int32_t pid = 0;                    ///< the node's kvferry-launch process
  std::string mode;                   ///< "per-node" or "per-rank" processes
  std::vector<std::string> expected;  ///< "INSTANCE/INDEX" of every rank it should host
  std::vector<rank_health> ranks;     ///< those that reported, by instance and index
  std::string metrics;                ///< "HOST:PORT" of its /metrics ("" none)

  friend bool operator==(const node_status&, const node_status&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_status& x) {
  return f(caf::meta::type_name("kvferry.node_status"), x.node, x.pid, x.mode, x.expected, x.ranks,
           x.metrics);
}

/// A node's status actor.
using status_actor = caf::typed_actor<caf::reacts_to<rank_report>, caf::reacts_to<rank_exit>,
                                      caf::replies_to<status_atom>::with<node_status>>;

}  // namespace kvferry
