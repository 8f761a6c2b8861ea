// The tcp backend's own settings (transport/options.hpp carries them:
// `opts.backend<tcp::tcp_options>()`).
#pragma once

#include <cstdint>

namespace kvferry::transport::tcp {

struct tcp_options {
  /// Connections per peer a large batch is split over (1..16).
  uint32_t streams = 4;
  /// SO_SNDBUF/SO_RCVBUF of each data connection, 0 for the kernel's autotuning.
  int socket_buffer = 4 << 20;
  /// A data connection whose bytes stay unacknowledged this long (a path that
  /// silently stopped carrying packets) fails, with the batches on it; 0 for
  /// the kernel's default (many minutes).
  int user_timeout_ms = 10000;
};

}  // namespace kvferry::transport::tcp
