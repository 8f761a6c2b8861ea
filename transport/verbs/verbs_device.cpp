#include "transport/verbs/verbs_device.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "transport/base/posix_socket.hpp"

namespace kvferry::transport::verbs {

namespace {

/// GPUDirect RDMA needs a peer-memory client in the kernel; without one,
/// ibv_reg_mr refuses device pointers.
bool peer_memory_loaded() {
  return ::access("/sys/module/nvidia_peermem", F_OK) == 0 ||
         ::access("/sys/kernel/mm/memory_peers/nv_mem/version", F_OK) == 0;
}

}  // namespace

result<std::vector<std::string>> rdma_devices() {
  int n = 0;
  ibv_device** list = ::ibv_get_device_list(&n);
  if (list == nullptr)
    return status::io_error(std::string{"no RDMA device: ibv_get_device_list failed: "} +
                            std::strerror(errno));
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i)
    names.emplace_back(::ibv_get_device_name(list[i]));
  ::ibv_free_device_list(list);
  if (names.empty())
    return status::io_error("no RDMA device: ibv_get_device_list found none");
  return names;
}

device::~device() {
  if (pd != nullptr)
    ::ibv_dealloc_pd(pd);
  if (context != nullptr)
    ::ibv_close_device(context);
}

result<std::shared_ptr<device>> open_device(const std::string& name, uint8_t port, int gid_index) {
  int n = 0;
  ibv_device** list = ::ibv_get_device_list(&n);
  if (list == nullptr || n == 0) {
    if (list != nullptr)
      ::ibv_free_device_list(list);
    return status::io_error("verbs: no RDMA device (ibv_get_device_list found none)");
  }
  ibv_device* chosen = nullptr;
  std::string known;
  for (int i = 0; i < n; ++i) {
    std::string dev_name = ::ibv_get_device_name(list[i]);
    known += (known.empty() ? "" : ", ") + dev_name;
    if (chosen == nullptr && (name.empty() || name == dev_name))
      chosen = list[i];
  }
  if (chosen == nullptr) {
    ::ibv_free_device_list(list);
    return status::invalid_argument("verbs: no RDMA device named '" + name + "' (found " + known +
                                    ")");
  }
  auto dev = std::make_shared<device>();
  dev->name = ::ibv_get_device_name(chosen);
  dev->context = ::ibv_open_device(chosen);
  ::ibv_free_device_list(list);
  auto fail = [&](const std::string& what) {
    return status::io_error("verbs: device " + dev->name + ": " + what + ": " + errno_text(errno));
  };
  if (dev->context == nullptr)
    return fail("ibv_open_device");
  ibv_device_attr attr{};
  if (::ibv_query_device(dev->context, &attr) != 0)
    return fail("ibv_query_device");
  dev->max_qp_wr = static_cast<uint32_t>(std::max(attr.max_qp_wr, 1));
  dev->max_sge = static_cast<uint32_t>(std::max(attr.max_sge, 1));
  dev->port = port;
  if (port == 0 || port > attr.phys_port_cnt)
    return status::invalid_argument("verbs: device " + dev->name + " has no port " +
                                    std::to_string(port) + " (" +
                                    std::to_string(attr.phys_port_cnt) + " ports)");
  if (::ibv_query_port(dev->context, port, &dev->port_attr) != 0)
    return fail("ibv_query_port " + std::to_string(port));
  if (dev->port_attr.state != IBV_PORT_ACTIVE)
    return status::io_error("verbs: device " + dev->name + " port " + std::to_string(port) +
                            " is not active (state " + ::ibv_port_state_str(dev->port_attr.state) +
                            ")");
  dev->gid_index = gid_index;
  if (gid_index >= 0 && ::ibv_query_gid(dev->context, port, gid_index, &dev->gid) != 0)
    return fail("ibv_query_gid index " + std::to_string(gid_index));
  if (gid_index < 0 && dev->port_attr.link_layer == IBV_LINK_LAYER_ETHERNET)
    return status::invalid_argument("verbs: device " + dev->name +
                                    " is RoCE (Ethernet link layer): set verbs_options::gid_index");
  dev->pd = ::ibv_alloc_pd(dev->context);
  if (dev->pd == nullptr)
    return fail("ibv_alloc_pd");
  dev->device_memory = peer_memory_loaded();
  if ((attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) != 0) {
    // Some providers report the flag but have no alloc_mw: try one.
    if (ibv_mw* probe = ::ibv_alloc_mw(dev->pd, IBV_MW_TYPE_2); probe != nullptr) {
      ::ibv_dealloc_mw(probe);
      dev->memory_windows = true;
    }
  }
  return dev;
}

}  // namespace kvferry::transport::verbs
