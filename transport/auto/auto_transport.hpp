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

/// An auto transport over `tcp` and `shm`, made by the registry with the same
/// options: tcp is needed (its error is returned), shm is used where it was
/// made (a machine without shared memory runs on tcp alone).
result<std::unique_ptr<transport>> make_auto_transport(result<std::unique_ptr<transport>> tcp,
                                                       result<std::unique_ptr<transport>> shm);

}  // namespace kvferry::transport::automatic
