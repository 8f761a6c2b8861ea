// The shm backend, for peers on one host: a receiver that admits peers' writes
// into this rank's regions, and one sender per peer that copies straight into
// the peer's memory. Regions must be memfd-backed (transport/shared_memory.hpp)
// so that peers can map them.
#pragma once

#include <memory>

#include "transport/transport.hpp"

namespace kvferry::transport::shm {

/// Creates an shm transport reachable at "shm://<socket name>" (an abstract
/// Unix socket named after the process and a counter).
result<std::unique_ptr<transport>> make_shm_transport(const options& opts);

}  // namespace kvferry::transport::shm
