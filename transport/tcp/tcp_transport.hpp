// The tcp backend: a receiver that listens for peers' writes into this rank's
// regions, and one sender per peer this rank writes to.
#pragma once

#include <memory>

#include "transport/transport.hpp"

namespace kvferry::transport::tcp {

/// Creates a tcp transport listening on opts.listen_host:opts.listen_port.
result<std::unique_ptr<transport>> make_tcp_transport(const options& opts);

}  // namespace kvferry::transport::tcp
