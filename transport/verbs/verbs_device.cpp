#include "transport/verbs/verbs_device.hpp"

#include <infiniband/verbs.h>

#include <cerrno>
#include <cstring>

namespace kvferry::transport::verbs {

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

}  // namespace kvferry::transport::verbs
