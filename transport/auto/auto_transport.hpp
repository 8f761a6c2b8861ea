// The "auto" backend: picks a backend per peer. It owns one transport of each
// host backend (shm, tcp), registers every region in each, and advertises a
// composite endpoint "auto://<host identity>;shm://...;tcp://...". connect()
// uses shm when the peer is on this host (same boot id and network namespace)
// and both sides could register their regions in shared memory, else tcp.
// A rank that wants one backend names it instead (rank_options::transport).
#pragma once

#include <memory>

#include "transport/transport.hpp"

namespace kvferry::transport::automatic {

/// Creates an auto transport; `opts` go to every backend it owns.
result<std::unique_ptr<transport>> make_auto_transport(const options& opts);

}  // namespace kvferry::transport::automatic
