// The tcp backend: a receiver that listens for peers' writes into this rank's
// regions, and one sender per peer this rank writes to, over
// tcp_options::streams connections (tcp_sender.hpp says how a batch is split
// over them and why the writes stay ordered).
#pragma once

#include <memory>

#include "transport/transport.hpp"

namespace kvferry::transport::tcp {

/// Creates a tcp transport listening on opts.listen_host:opts.listen_port, with
/// the connections per peer (1..16), socket buffers and user timeout of
/// opts.backend<tcp_options>() (tcp_options.hpp).
result<std::unique_ptr<transport>> make_tcp_transport(const options& opts);

}  // namespace kvferry::transport::tcp
