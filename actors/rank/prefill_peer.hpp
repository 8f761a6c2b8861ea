// One prefill instance as a decode rank sees it: where its bootstrap is, how
// far the handshake with its ranks has come, and whether it serves rooms now.
// Plain logic: the decode rank actor looks things up, sends and arms timers;
// this class keeps the record and says what a new fact means.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "actors/plan/tp_mapping.hpp"
#include "actors/rank/decode_room.hpp"
#include "messages/bootstrap.hpp"
#include "messages/decision.hpp"
#include "messages/failure.hpp"
#include "messages/handles.hpp"

namespace kvferry {

struct prefill_peer {
  /// resolving: looked up, rooms wait; ready: rooms proceed; refused: the
  /// pairing cannot work (rooms fail); down: a rank of it left or was lost,
  /// so new rooms fail at once with `down_cause` while it is probed again
  /// (a new topology, a handshake) until it is back.
  enum class stage { resolving, ready, refused, down };

  /// What a failed lookup or handshake leads to.
  enum class retry {
    probe,  ///< it is down: probe again later (arm_probe)
    again,  ///< rooms wait for it: look it up again after backoff()
    idle,   ///< nobody waits: the next room looks it up again
    down,   ///< contact with it was lost and it cannot be reached: it is down (go_down)
  };

  /// What a complete topology of the instance means for this decode rank.
  struct reading {
    enum class action {
      handshake,  ///< register with `sources` (their registrations, in order)
      refused,    ///< the pairing cannot work: `refusal`
      retry,      ///< not usable yet: `error`
    } what = action::retry;
    std::vector<rank_registration> sources;
    failure refusal;
    std::string error;
    uint64_t round = 0;  ///< the handshake's round
  };

  /// What going down changed.
  struct went_down {
    bool fresh = false;                       ///< it was not down before
    std::vector<prefill_rank_actor> dropped;  ///< handles to stop monitoring
  };

  stage phase = stage::resolving;
  bootstrap_locator where;
  std::string instance;          ///< its name, once a topology named it
  caf::node_id bootstrap_node;   ///< the bootstrap's node: its ranks there are reached directly
  uint64_t round = 0;            ///< bumped per topology: older callbacks are ignored
  bool decider_reached = false;  ///< the decider connected to its ranks (reach_peers)
  failure down_cause;            ///< phase down: what new rooms fail with
  bool probe_armed = false;      ///< phase down: a probe is scheduled
  bool down_since_up = false;    ///< it went down (go_down), and has not come up since
  std::vector<participant> everyone;  ///< every rank of the instance: the room's prefill side
  std::vector<room_source> sources;   ///< the ranks this rank receives from
  std::map<rank_ref, prefill_rank_actor> handles;  ///< of the sources
  std::set<rank_ref> accepted;
  failure refusal;
  std::string last_error;
  uint32_t attempts = 0;
  bool in_flight = false;  ///< a lookup or handshake is running
  /// Contact with it was lost (lose_contact): which rank of it this rank was
  /// bound to, until a handshake brings it back or it goes down.
  std::optional<rank_ref> contact_lost;

  /// True while callbacks of handshake `r` still matter.
  bool current(uint64_t r) const { return round == r; }

  /// Reads a complete topology for decode rank `me` (its layout `mine`, its
  /// instance of `decode` size): names the instance, its ranks and this rank's
  /// sources, and starts a new handshake round.
  reading read(const topology& topo, const rank_ref& me, const kv_layout& mine,
               instance_size decode);

  /// Source `src` accepted this rank's registration (staging its chunks or not).
  void accept(const rank_ref& src, bool staged);

  /// True once every source accepted and the decider reached the ranks, while
  /// a handshake runs.
  bool handshake_done() const;

  /// The handshake is done: it serves rooms. True if it went down since it
  /// was last up (also when a verdict of lost contact moved it from down to
  /// resolving since: the scheduler was told it down, and must hear it back).
  bool come_up();

  /// The pairing cannot work: rooms fail with `why`.
  void refuse(failure why);

  /// A lookup or handshake failed with `error`; `rooms_waiting`: live rooms
  /// need it.
  retry fail(std::string error, bool rooms_waiting);

  /// A verdict says contact with it was lost (the room bound to `bound`):
  /// its handles here may be of a dead incarnation, so it is looked up again
  /// (resolving). A lookup or handshake that fails then means it is down
  /// (fail() says retry::down), as a down_msg of `bound` would have said.
  /// The handles to stop monitoring.
  std::vector<prefill_rank_actor> lose_contact(const rank_ref& bound);

  /// It cannot serve rooms now: new ones fail with `cause` (a departure's
  /// words, instance_dead, stay once known). `survivors`: its ranks still
  /// there, if known.
  went_down go_down(failure cause, std::optional<std::vector<participant>> survivors);

  /// True if a probe is to be scheduled now (none is).
  bool arm_probe();

  /// How long to wait before looking again: doubling from 50 ms up to 1 s.
  std::chrono::nanoseconds backoff() const;

  /// Whether `rank` is one of the instance's ranks.
  bool serves(const rank_ref& rank) const;

  /// Whether the sources are still those a room bound to `bound` (its first
  /// source) was bound to: no lookup since found another incarnation.
  bool same_sources(const rank_ref& bound) const;

 private:
  /// Forgets the sources and their handles (returned, to stop monitoring)
  /// and voids a handshake under way.
  std::vector<prefill_rank_actor> drop_sources();
};

}  // namespace kvferry
