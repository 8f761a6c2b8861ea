// The prefill rank actor: one per TP rank of a prefill instance. It registers
// with its instance's bootstrap, accepts decode ranks' registrations (checking
// that the layouts pair), owns the rooms of this rank (their state machines
// and deadlines), waits for every decode rank it serves, hands chunks to its
// transfer actor, and reports its finish or a failure to each room's decider;
// it concludes a room only with the decider's verdict (or alone, for a room no
// decode rank has asked for).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>

#include <caf/actor_addr.hpp>
#include <caf/actor_clock.hpp>

#include "actors/base/guard.hpp"
#include "actors/base/sender_check.hpp"
#include "actors/common/deadline_book.hpp"
#include "actors/common/deadlines.hpp"
#include "actors/common/event_ring.hpp"
#include "actors/metrics/rank_figures.hpp"
#include "actors/rank/early_arrivals.hpp"
#include "actors/rank/incarnations.hpp"
#include "actors/rank/prefill_room.hpp"
#include "actors/rank/silence_watch.hpp"
#include "messages/bootstrap.hpp"
#include "messages/handles.hpp"
#include "messages/layout.hpp"
#include "messages/room.hpp"

namespace kvferry {

struct prefill_rank_config {
  rank_ref self;
  uint32_t tp_size = 1;
  uint32_t pp_size = 1;
  kv_layout layout;
  std::string data_endpoint;
  deadlines limits;
  bootstrap_locator bootstrap;  ///< where this rank registers
  transfer_actor transfer;
  /// Its transfer actor has a gather buffer: chunks to a decode rank that
  /// offers a staging ring take it where the TP sizes differ (MHA/GQA).
  bool staging = false;
  /// Held while the actor lives: the slots of its rooms watch it.
  std::shared_ptr<const void> alive;
  /// Where this rank's actor is published for decode processes to connect to
  /// it directly (not published: they reach it through its bootstrap's node).
  control_endpoint control;
  /// The rank registers only once told where it is published (a
  /// control_endpoint message from its runtime).
  bool publish_first = false;
  /// This rank's own incarnation (a restarted rank process draws a new one).
  uint64_t rank_generation = 0;
  /// Where it publishes its instance's death and the rooms asked for but not
  /// opened (may be null).
  std::shared_ptr<rank_board> board;
  /// Its figures for Prometheus (null: none kept).
  std::shared_ptr<metrics::rank_figures> figures;
  /// Its process's life token, told to the bootstrap (messages/life.hpp).
  life_token_ref life;
};

struct prefill_rank_state {
  static inline const char* name = "kvferry.prefill_rank";

  prefill_rank_config cfg;
  std::map<uint64_t, prefill_room> rooms;      // live rooms by id
  event_ring events;                           // recent room events, for kvferry-ctl trace
  std::map<uint64_t, decider_actor> deciders;  // room id → its decider, once known
  /// The deciders this rank monitors: each once, however many rooms it decides.
  std::set<caf::actor_addr> deciders_monitored;
  /// Finished rooms waiting for their verdict: when their finish was last
  /// sent (decider pings remind the decider of them).
  std::map<uint64_t, caf::actor_clock::time_point> finish_told;

  /// Requests and verdicts for rooms not opened yet; outcomes of cleared rooms.
  early_arrivals early;

  /// Decode ranks whose registration was accepted.
  struct peer {
    decode_rank_actor handle;
    kv_layout layout;
  };
  std::map<rank_ref, peer> peers;
  /// The newest generation seen of each decode instance.
  incarnations incarnations_seen;

  bootstrap_actor bootstrap;
  bool registered = false;
  /// Set while the bootstrap says a rank of this instance left and has not
  /// come back: why the instance serves no room (instance_dead).
  std::optional<failure> instance_down;
  /// Senders of dropped messages, logged once each (actors/base/sender_check.hpp).
  stranger_log<caf::actor_addr> strangers;
  /// The other ranks of this instance, from the bootstrap's last topology.
  std::vector<prefill_rank_actor> siblings;
  /// The deciders of this rank's live rooms, watched for silence.
  silence_watch<caf::actor_addr, caf::actor_clock::time_point, rank_ref> deciders_heard;
  bool tick_armed = false;
  caf::actor_clock::time_point tick_due{};  // when the armed check should run
  /// The deadlines of the live rooms, behind one timer (deadline_atom).
  deadline_book<caf::actor_clock::time_point> room_deadlines;
  /// Run first inside the guard of every handler (actors/base/guard.hpp).
  handler_hook before_handler;
};

prefill_rank_actor::behavior_type prefill_rank(
    prefill_rank_actor::stateful_pointer<prefill_rank_state> self, prefill_rank_config cfg);

}  // namespace kvferry
