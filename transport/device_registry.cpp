#include "transport/device_registry.hpp"

#include "transport/base/host_device_copier.hpp"
#ifdef KVFERRY_HAVE_CUDA
#include "transport/cuda/cuda_device_copier.hpp"
#endif

namespace kvferry::transport {

std::vector<std::string> device_copier_names() {
#ifdef KVFERRY_HAVE_CUDA
  return {"cuda", "host"};
#else
  return {"host"};
#endif
}

result<std::shared_ptr<device_copier>> make_device_copier(std::string_view name,
                                                          [[maybe_unused]] int device) {
  if (name == "host")
    return std::shared_ptr<device_copier>{std::make_shared<host_device_copier>()};
#ifdef KVFERRY_HAVE_CUDA
  if (name == "cuda")
    return cuda::make_cuda_device_copier(device);
#endif
  std::string known;
  for (auto& n : device_copier_names())
    known += (known.empty() ? "" : ", ") + n;
  std::string why = name == "cuda" ? " (this binary was built without the CUDA toolkit)" : "";
  return status::invalid_argument("device copier '" + std::string{name} + "'" + why +
                                  ", expected one of: " + known);
}

}  // namespace kvferry::transport
