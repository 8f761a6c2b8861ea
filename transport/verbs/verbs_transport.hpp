// The verbs backend: RDMA WRITE over RC queue pairs (libibverbs). A receiver
// admits batches over a TCP side channel and advertises its regions' keys;
// one sender per peer posts the writes. Endpoint: "verbs://host:port" (the
// side channel; queue pair numbers, LID/GID and PSNs are exchanged on it).
#pragma once

#include <memory>

#include "transport/transport.hpp"

namespace kvferry::transport::verbs {

/// Opens the device of opts.backend<verbs_options>() (verbs_options.hpp; the
/// first one when empty) and listens for side
/// channels on opts.listen_host:opts.listen_port. Fails with "verbs: no RDMA
/// device (...)" where the machine has none.
result<std::unique_ptr<transport>> make_verbs_transport(const options& opts);

}  // namespace kvferry::transport::verbs
