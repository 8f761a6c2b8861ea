// Deterministic fault simulation. Whole instances run on CAF's test
// coordinator (inproc transport, virtual time) and move one room while a fault
// strikes at a chosen step of the protocol: a rank, the decider, the bootstrap
// or a whole node killed or cut off (frozen: nothing it is sent is handled,
// nothing it would send goes out, until it heals), or an abort from either
// side's scheduler. Messages are delivered one at a time, in FIFO order or in
// an order (and with clock steps) drawn from a seed, so every run can be
// replayed. After every scenario the properties of the brief are checked:
// agreement, termination, no write after release, no leak.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvferry::test::sim {

enum class fault_kind : uint8_t { none, kill, cut_off, abort };

enum class target : uint8_t {
  prefill_rank,  ///< one prefill rank (its rank and transfer actors)
  decode_rank,   ///< one decode rank
  decider,       ///< the decode instance's decider
  bootstrap,     ///< the prefill instance's bootstrap
  prefill_node,  ///< every actor of the prefill instance
  decode_node,   ///< every actor of the decode instance
};

struct fault {
  fault_kind kind = fault_kind::none;
  target where = target::prefill_rank;
  uint32_t index = 0;  ///< which rank, for rank targets and aborts
  size_t step = 0;     ///< messages delivered before it strikes
  /// cut_off only: messages delivered to the others before it heals (0: it
  /// heals once every deadline has passed).
  size_t heal_after = 0;
};

struct scenario {
  uint32_t prefill_tp = 2;
  uint32_t decode_tp = 2;
  std::vector<fault> strikes;  ///< in any order
  /// 0: FIFO delivery. Otherwise the next actor to run, and when the clock
  /// moves between deliveries, are drawn from this seed.
  uint64_t seed = 0;
  /// DP attention: the room's instances are DP group 1 of 2 of each side,
  /// behind one bootstrap, and the faults strike group 1 (its bootstrap is
  /// the group's). Group 0 (one prefill rank behind the same bootstrap, one
  /// decode rank with a decider of its own) moves a room of its own at the
  /// same time: it must never hear of the room, and always succeed.
  bool dp = false;
};

struct report {
  size_t steps = 0;       ///< messages delivered while the schedulers drove the room
  std::string struck_at;  ///< the message delivered just before the fault
  std::vector<std::string> violations;
};

/// "TP 2->2, kill decode rank 1 at step 40, seed 0" ("TP 2->2 in DP group 1 of 2, ...").
std::string to_string(const scenario& s);

/// Runs one scenario in a fresh actor system and checks it.
report run(const scenario& s);

/// The deterministic enumeration for one mapping: every rank, the decider,
/// the bootstrap and both nodes killed and cut off, and an abort from each
/// side, at each of steps 0..`steps` (the last one: after the verdict).
std::vector<fault> every_fault(uint32_t prefill_tp, uint32_t decode_tp, size_t steps);

}  // namespace kvferry::test::sim
