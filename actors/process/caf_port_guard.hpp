// The guard on this process's CAF ports (bootstrap, status, decider, a rank's
// control port): whatever a stranger or an insider sends there costs a
// bounded amount. CAF 0.17 allocates whatever payload a BASP header declares
// (up to 4 GiB, 32 bytes buy it) and keeps a connection that never finishes
// its handshake open for good; it cannot cap either itself.
//
// The guard stands between the socket and CAF, in this process, at no cost
// to the data plane: it takes over the calls CAF's middleman makes (accept,
// recv, close from libc; the header check caf::io::basp::valid from
// libcaf_io; SSL_read, actors/process/openssl_error_queue.cpp), as the executable's
// own definitions (an executable's definitions come first in the dynamic
// linker's scope). On a connection a guarded port accepted it
//  - reads every BASP header as it comes (basp_frames.hpp) and closes the
//    connection before CAF sizes a buffer for a payload above the cap;
//  - closes it if its BASP handshake is not complete within the deadline
//    (a partial header held open, a drip of a byte a second);
//  - refuses a connection beyond the caps per source address and in all.
// Each refusal is logged once per kind and source, and counted
// (kvferry_caf_port_refusals_total). Under TLS the frames are read as
// SSL_read hands them to CAF, so a holder of a cluster certificate meets
// the same caps. A socket that is not a guarded port's pays one atomic load
// per recv.
//
// Where the executable is not kvferry's (the Python binding is loaded into
// python), libc's calls are python's: only the payload cap holds there
// (caf::io::basp::valid is libcaf_io's, found in the module first).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "actors/metrics/registry.hpp"

namespace kvferry {

struct caf_port_limits {
  /// The largest payload a BASP header may declare (basp_frames.hpp).
  uint32_t max_payload = 16u << 20;
  /// How long an accepted connection has to complete its BASP handshake.
  std::chrono::milliseconds handshake{5000};
  /// Connections at once from one source address, over all guarded ports.
  uint32_t per_source = 128;
  /// Connections at once over all guarded ports.
  uint32_t total = 1024;
};

/// Sets the limits (before the first port is guarded; later, new
/// connections get them).
void set_caf_port_limits(const caf_port_limits& limits);
caf_port_limits caf_port_limits_now();

/// Guards CAF port `port` of this process from now on; `tls`: its
/// connections speak TLS (their frames are read after decryption). Nothing
/// while the guard is off (set_caf_port_guard).
void guard_caf_port(uint16_t port, bool tls);

/// On by default; off, ports published from then on are not guarded (for
/// `kvferry-bench tcp`, which measures what the guard costs a room).
void set_caf_port_guard(bool on);

/// What the guard refused since the process started.
struct caf_port_refusals {
  uint64_t oversized = 0;        ///< a header declared a payload above the cap
  uint64_t malformed = 0;        ///< a header named no BASP operation
  uint64_t handshake_late = 0;   ///< no complete handshake within the deadline
  uint64_t over_source_cap = 0;  ///< one more connection from a source at its cap
  uint64_t over_total_cap = 0;   ///< one more connection with all at the cap
  uint64_t total() const {
    return oversized + malformed + handshake_late + over_source_cap + over_total_cap;
  }
};
caf_port_refusals caf_port_refusals_now();

/// Connections guarded now (accepted on a guarded port, not closed yet).
uint32_t caf_port_connections_now();

/// Empty when the guard stands between this process's sockets and CAF (its
/// definitions are the ones libcaf_io calls), else why not (not a kvferry
/// executable: only the payload cap holds).
std::string caf_port_guard_gaps();

/// Counts the guard's refusals in `reg` at each of its collections
/// (kvferry_caf_port_refusals_total by kind, kvferry_caf_port_connections).
void watch_caf_ports(metrics::registry& reg, const metrics::label_set& labels);

}  // namespace kvferry
