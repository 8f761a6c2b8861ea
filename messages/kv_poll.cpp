#include "messages/kv_poll.hpp"

namespace kvferry {

std::string to_string(kv_poll x) {
  switch (x) {
    case kv_poll::failed:
      return "Failed";
    case kv_poll::bootstrapping:
      return "Bootstrapping";
    case kv_poll::waiting_for_input:
      return "WaitingForInput";
    case kv_poll::transferring:
      return "Transferring";
    case kv_poll::success:
      return "Success";
  }
  return "KVPoll(" + std::to_string(static_cast<int>(x)) + ")";
}

}  // namespace kvferry
