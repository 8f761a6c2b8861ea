// The verbs backend's view of the machine's RDMA devices (libibverbs). The
// backend itself (RC queue pairs, RDMA WRITE, completion channel) is not built
// yet; this probe is what its tests and the "auto" selection ask first.
#pragma once

#include <string>
#include <vector>

#include "transport/status.hpp"

namespace kvferry::transport::verbs {

/// Names of the RDMA devices ibv_get_device_list() reports; an error saying
/// why when there are none ("no RDMA device ...").
result<std::vector<std::string>> rdma_devices();

}  // namespace kvferry::transport::verbs
