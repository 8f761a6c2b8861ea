// The decider of a decode instance: for every room, it knows who takes part
// (every decode rank of the instance, every prefill rank of the instance the
// room comes from), collects their finishes and the first failure anyone
// reports, and sends the one verdict to all of them. It draws each room's
// generation. Decode ranks register with it at start; it monitors them, and a
// rank that goes down fails the rooms it had joined. It pings every rank of
// its live rooms on both sides, so a rank that goes silent without dropping
// its connection (frozen, partitioned) is declared lost as fast; the ranks
// watch its pings in turn, and it never sends a verdict a rank could have
// pre-empted by declaring it lost (the lease, see deadlines).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include <caf/actor_clock.hpp>
#include <caf/node_id.hpp>

#include "actors/base/guard.hpp"
#include "actors/base/sender_check.hpp"
#include "actors/common/deadlines.hpp"
#include "actors/decision/decision_book.hpp"
#include "actors/decision/liveness.hpp"
#include "actors/decision/missing_members.hpp"
#include "actors/metrics/decider_figures.hpp"
#include "actors/process/life_token.hpp"
#include "messages/handles.hpp"

namespace kvferry {

struct decider_state {
  static inline const char* name = "kvferry.decider";

  decision_book book{"", 0, 1, 1, 1};
  std::map<std::pair<uint32_t, uint32_t>, decode_rank_actor> members;  // by (tp, pp)
  /// The life tokens of members' processes on this host, by (tp, pp): a
  /// death is known within a millisecond (actors/process/life_token.hpp).
  std::map<std::pair<uint32_t, uint32_t>, std::string> member_life;
  life_watch lives;
  std::map<rank_ref, prefill_rank_actor> prefill;  // participants' handles
  /// A prefill rank declared lost by heartbeats: a room that names it fails
  /// at once with `why`, and it is still pinged (the re-probe) until it
  /// answers, a new incarnation of it is named, or it has been lost for a
  /// Bootstrapping deadline (then it is forgotten: the next room pays a
  /// silence again, and nothing is kept for a rank that never comes back).
  struct lost_rank {
    prefill_rank_actor handle;
    failure why;
    caf::actor_clock::time_point since;
  };
  std::map<rank_ref, lost_rank> lost_prefill;
  /// Members that went down or were declared lost and are not back: while
  /// one is missing, every room fails at once (instance_incomplete).
  missing_members missing;
  /// Processes of prefill ranks this decider connected to (reach_peers),
  /// each once, through one endpoint per process: a second connection
  /// between two processes may make CAF 0.17 drop the first.
  std::set<caf::node_id> reached;

  deadlines limits;
  liveness<rank_ref> beats{5};  // members and prefill participants of undecided rooms
  /// When the last ping each of them answered was sent: the lease.
  std::map<rank_ref, caf::actor_clock::time_point> answered_at;
  /// When a rank that never answered was first pinged: its silence counts
  /// from then.
  std::map<rank_ref, caf::actor_clock::time_point> first_asked;
  uint64_t pings = 0;    // heartbeat sequence numbers
  bool beating = false;  // a heartbeat round is scheduled
  /// When the next round is due, and when this decider last came back from a
  /// stall (a round that ran late: it was frozen or starved, and the silence
  /// of others meanwhile says nothing about them).
  caf::actor_clock::time_point tick_due{};
  caf::actor_clock::time_point stall_end{};
  /// Joins, finishes, failures and leaves from senders that are not the
  /// room's ranks: dropped, each sender logged once.
  stranger_log<caf::actor_addr> strangers;
  /// Failures of live rooms (their exact key) from senders no join named
  /// yet, oldest first: taken once a join names the sender (decider_actor.cpp,
  /// hold_failure), at most 256.
  std::deque<std::pair<caf::actor_addr, room_failure>> held_failures;
  /// Under TLS, the node whose processes may register as members (its
  /// certificate's CN, proven at the gateway); empty: any.
  std::string node;
  /// Run first inside the guard of every handler (actors/base/guard.hpp).
  handler_hook before_handler;
  /// Its figures for Prometheus (null: none kept).
  std::shared_ptr<metrics::decider_figures> figures;
};

/// Spawns the decider of decode instance `instance` of tp_size x pp_size
/// ranks; `generation` names this incarnation of the instance; `limits`
/// gives the heartbeat (every rank of a live room is pinged, and one that
/// answers none of `heartbeat_misses` rounds in a row is declared lost).
decider_actor::behavior_type decider(decider_actor::stateful_pointer<decider_state> self,
                                     std::string instance, uint32_t tp_size, uint32_t pp_size,
                                     uint64_t generation, deadlines limits);

/// The same, on node `node` of the cluster file: under TLS only processes
/// that proved that node at this process's gateway register as members.
/// With `metrics`, it keeps its figures there (actors/metrics/decider_figures.hpp).
decider_actor::behavior_type decider_on(decider_actor::stateful_pointer<decider_state> self,
                                        std::string instance, uint32_t tp_size, uint32_t pp_size,
                                        uint64_t generation, deadlines limits, std::string node,
                                        std::shared_ptr<metrics::registry> metrics);

}  // namespace kvferry
