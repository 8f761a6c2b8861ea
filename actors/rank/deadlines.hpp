// How long a room may stay in each non-terminal state. Every state has one;
// a room that passes it fails with a cause that names the state.
#pragma once

#include <chrono>

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
};

}  // namespace kvferry
