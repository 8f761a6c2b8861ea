// How long a room may stay in each non-terminal state (every state has one; a
// room that passes it fails with a cause that names the state), and how fast
// a silent peer is declared lost.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace kvferry {

struct deadlines {
  /// Prefill: waiting for the decode side's destination pages. Decode: waiting
  /// for the prefill topology and the handshake.
  std::chrono::nanoseconds bootstrapping = std::chrono::seconds{60};
  /// Prefill: waiting for the scheduler's chunks. Decode: waiting for the first
  /// chunk to land. Re-armed by progress (init, each chunk).
  std::chrono::nanoseconds waiting_for_input = std::chrono::seconds{300};
  /// Both: between two chunks, and from the last chunk to the verdict.
  /// Re-armed by every chunk that lands.
  std::chrono::nanoseconds transferring = std::chrono::seconds{60};
  /// A participant that reported a failure waits this long for the decider's
  /// verdict before it concludes with its own cause.
  std::chrono::nanoseconds verdict = std::chrono::seconds{5};
  /// The decider pings every rank of its undecided rooms this often...
  std::chrono::nanoseconds heartbeat = std::chrono::milliseconds{200};
  /// ... and declares one lost after this many rounds in a row without an
  /// answer (one ping is out at a time; a late answer still counts).
  /// SGLang's default is 5 s x 2.
  uint32_t heartbeat_misses = 5;
  /// Admission: the most rooms a decode instance's decider holds undecided
  /// at once; a room opened beyond it fails at once on every rank with
  /// `overloaded` (its limit in the cause) instead of queueing behind the
  /// others until their heartbeats and deadlines run out.
  uint32_t max_rooms = 4096;

  /// How long silence lasts before the decider declares a rank lost (it
  /// notices within one more heartbeat).
  std::chrono::nanoseconds silence() const { return heartbeat * heartbeat_misses; }

  /// How long a rank with live rooms goes without a ping before it declares
  /// the decider lost: twice as long (and two rounds more), so that a rank
  /// the decider lost is named before the decider could be blamed.
  std::chrono::nanoseconds decider_silence() const { return 2 * silence() + 2 * heartbeat; }

  /// The decider's lease: it decides a room as usual only while every
  /// participant answered a ping sent within this (or joined the room since);
  /// past it, a participant may have declared the decider lost, and the
  /// verdict is that cause. One heartbeat short of decider_silence(), for
  /// the verdict's way to the rank.
  std::chrono::nanoseconds decider_lease() const { return decider_silence() - heartbeat; }
};

/// Why `d` cannot be used (a zero or negative duration, no miss allowed), or
/// nullopt.
inline std::optional<std::string> validate(const deadlines& d) {
  auto positive = [](std::chrono::nanoseconds v, const char* name) -> std::optional<std::string> {
    if (v.count() > 0)
      return std::nullopt;
    return std::string{name} + " = " + std::to_string(v.count()) +
           "ns, expected a positive duration";
  };
  for (auto bad :
       {positive(d.bootstrapping, "bootstrap-timeout"),
        positive(d.waiting_for_input, "waiting-timeout"),
        positive(d.transferring, "transfer-timeout"), positive(d.verdict, "verdict-timeout"),
        positive(d.heartbeat, "heartbeat-interval")})
    if (bad)
      return bad;
  if (d.heartbeat_misses == 0)
    return std::string{"heartbeat-misses = 0, expected at least 1"};
  if (d.max_rooms == 0)
    return std::string{"max-rooms = 0, expected at least 1"};
  return std::nullopt;
}

}  // namespace kvferry
