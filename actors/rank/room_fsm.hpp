// The KVPoll state machine of one room on one rank, with its deadlines. Plain
// logic: the rank actor calls it and keeps what take_timer() arms in its
// deadline_book (one deadline per room, behind one timer per rank).
//
//   Bootstrapping ──▶ WaitingForInput ──▶ Transferring ──▶ Success
//        │                  │                  │
//        └──────────────────┴──────────────────┴─────────▶ Failed (sticky)
//
// Monotonic: advance() only moves up; Failed and Success are final. Each
// non-terminal state arms a deadline; touch() re-arms it on progress; a
// deadline carries the epoch it was armed with, and only the current epoch
// counts. await_verdict() swaps the state's deadline for the verdict
// deadline once this rank has reported a failure to the room's decider.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "actors/common/deadlines.hpp"
#include "messages/failure.hpp"
#include "messages/ids.hpp"
#include "messages/kv_poll.hpp"

namespace kvferry {

class room_fsm {
 public:
  /// A deadline to schedule: echo `epoch` back after `after`.
  struct timer {
    uint64_t epoch;
    std::chrono::nanoseconds after;
  };

  /// Starts in Bootstrapping with its deadline armed.
  explicit room_fsm(const deadlines& limits);

  kv_poll state() const { return state_; }
  bool terminal() const { return is_terminal(state_); }

  /// Moves up to `to` (WaitingForInput or Transferring) and arms its deadline.
  /// Returns false, changing nothing, if `to` is not above the current state
  /// or the room is terminal.
  bool advance(kv_poll to);

  /// Re-arms the current state's deadline (progress was made).
  void touch();

  /// Concludes Success. False if already terminal.
  bool succeed();

  /// Concludes Failed with `why`. The first conclusion wins; false if terminal.
  bool fail(failure why);

  /// The failure once Failed.
  const failure& why() const { return why_; }

  /// Arms the verdict deadline: this rank reported a failure (or, with
  /// `finished`, finished its part) and waits for the decider's verdict,
  /// `after` long (default: the verdict deadline). The state stays as it is.
  void await_verdict();
  void await_verdict(std::chrono::nanoseconds after, bool finished);
  bool awaiting_verdict() const { return awaiting_verdict_; }

  /// The verdict is late while the decider is still heard from: wait another
  /// verdict deadline. Returns how many times the wait was extended.
  uint32_t wait_longer();

  /// The timer armed since the last call, once; nullopt if nothing new.
  std::optional<timer> take_timer();

  /// True if a deadline message with `epoch` is the one armed now.
  bool is_current(uint64_t epoch) const { return !terminal() && epoch == epoch_; }

  /// "room 42#7 stayed in WaitingForInput past its 300s deadline" (or the
  /// verdict wait when awaiting one).
  std::string stuck_cause(const room_key& key) const;

  /// A move the rank's figures have not counted yet: from the state last
  /// taken (none the first time) to the state now. Once per move.
  struct change {
    std::optional<kv_poll> from;
    kv_poll to;
  };
  std::optional<change> take_change();

  /// When the room was opened on this rank (steady clock).
  std::chrono::steady_clock::time_point opened_at() const { return opened_at_; }

 private:
  void arm(std::chrono::nanoseconds after);
  std::chrono::nanoseconds limit_of(kv_poll s) const;

  deadlines limits_;
  kv_poll state_ = kv_poll::bootstrapping;
  failure why_;
  uint64_t epoch_ = 0;
  std::chrono::nanoseconds armed_for_{0};
  bool timer_pending_ = false;
  bool awaiting_verdict_ = false;
  bool finished_ = false;
  uint32_t extensions_ = 0;
  std::optional<kv_poll> counted_;
  std::chrono::steady_clock::time_point opened_at_ = std::chrono::steady_clock::now();
};

}  // namespace kvferry
