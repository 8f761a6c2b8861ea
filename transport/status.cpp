#include "transport/status.hpp"

namespace kvferry::transport {

std::string_view to_string(code c) {
  switch (c) {
    case code::ok:
      return "ok";
    case code::in_progress:
      return "in_progress";
    case code::invalid_argument:
      return "invalid_argument";
    case code::unknown_region:
      return "unknown_region";
    case code::out_of_bounds:
      return "out_of_bounds";
    case code::unknown_peer:
      return "unknown_peer";
    case code::connect_failed:
      return "connect_failed";
    case code::connection_lost:
      return "connection_lost";
    case code::protocol_error:
      return "protocol_error";
    case code::io_error:
      return "io_error";
    case code::shut_down:
      return "shut_down";
    case code::fenced:
      return "fenced";
    case code::not_granted:
      return "not_granted";
  }
  return "unknown_code";
}

std::string status::to_string() const {
  if (ok())
    return "ok";
  std::string s{kvferry::transport::to_string(code_)};
  if (!message_.empty())
    s += ": " + message_;
  return s;
}

}  // namespace kvferry::transport
