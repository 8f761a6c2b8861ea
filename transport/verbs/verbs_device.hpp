// The verbs backend's view of the machine's RDMA devices (libibverbs): the
// probe its tests and the "auto" selection ask first, and the opened device
// (context, protection domain, port) every queue pair and region of one
// transport shares.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "transport/status.hpp"

namespace kvferry::transport::verbs {

/// Names of the RDMA devices ibv_get_device_list() reports; an error saying
/// why when there are none ("no RDMA device ...").
result<std::vector<std::string>> rdma_devices();

/// One opened device. Owns the context and the protection domain.
struct device {
  ibv_context* context = nullptr;
  ibv_pd* pd = nullptr;
  std::string name;
  uint8_t port = 1;
  ibv_port_attr port_attr{};
  int gid_index = -1;  ///< -1: address by LID only (InfiniBand without GRH)
  ibv_gid gid{};
  uint32_t max_qp_wr = 0;
  uint32_t max_sge = 0;
  /// GPUDirect RDMA: a peer-memory client (nvidia_peermem) is loaded, so
  /// ibv_reg_mr accepts device pointers.
  bool device_memory = false;
  /// Type-2B memory windows: the device says so and one could be allocated
  /// (verbs_options::windows).
  bool memory_windows = false;

  device() = default;
  device(const device&) = delete;
  device& operator=(const device&) = delete;
  ~device();
};

/// Opens `name` (empty: the first device) and queries `port`. `gid_index` -1
/// uses the LID only; otherwise that GID must exist (RoCE needs one).
result<std::shared_ptr<device>> open_device(const std::string& name, uint8_t port, int gid_index);

}  // namespace kvferry::transport::verbs
