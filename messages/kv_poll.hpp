// KVPoll: the state of one room on one rank, as the scheduler sees it.
//
//   Failed(0) < Bootstrapping < WaitingForInput < Transferring < Success
//
// Monotonic: a room only moves up, except into Failed, which is terminal and
// sticky. The order lets a scheduler reduce states of several rooms with MIN.
#pragma once

#include <cstdint>
#include <string>

namespace kvferry {

enum class kv_poll : uint8_t {
  failed = 0,
  bootstrapping = 1,
  waiting_for_input = 2,
  transferring = 3,
  success = 4,
};

/// "Bootstrapping", "WaitingForInput", ... (SGLang's spelling, for operators).
std::string to_string(kv_poll x);

/// True for Failed and Success.
constexpr bool is_terminal(kv_poll x) {
  return x == kv_poll::failed || x == kv_poll::success;
}

}  // namespace kvferry
