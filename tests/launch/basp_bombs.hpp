// The BASP bombs of the hostile tests (issue 29), on every CAF port of both
// node processes of a serving run: a 32-byte header declaring 1-4 GiB of
// payload for each of client_handshake, direct_message, server_handshake and
// heartbeat, then 1 KiB, held open; a drip of one byte every 100 ms for 7 s;
// 1,000 connections at once. Plain, or under [tls] as a holder of a cluster
// certificate: the TLS handshake done, the same bytes inside it. What it saw
// is returned; the test asserts it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include "actors/process/tls_files.hpp"

namespace kvferry::test {

/// The process a bomb run looks at: its pid and the tcp ports it listens on.
struct bomb_target {
  int pid = 0;
  std::set<uint16_t> ports;
};

struct bomb_findings {
  std::string error;  ///< set when the attack could not be mounted
  size_t caf_ports = 0;
  int bombs = 0, bombs_closed = 0;
  int drips = 0, drips_closed = 0;
  int crowd = 0, crowd_closed = 0;
  long rss_before[2] = {0, 0}, rss_peak[2] = {0, 0};  ///< per target, KiB
};

/// Bombs, drips and a crowd on the CAF ports of `a` and `b` (a port is
/// CAF's when it answers with a BASP server handshake, inside TLS when
/// `as` is given: the certificate shown).
bomb_findings bomb_caf_ports(const bomb_target& a, const bomb_target& b,
                             const std::optional<tls_files>& as = std::nullopt);

/// The test's word on `f`: every bomb, drip and crowd connection closed by
/// the nodes, and neither node's RSS moved by 64 MiB.
void check_bombs_cost_nothing(const bomb_findings& f);

}  // namespace kvferry::test
