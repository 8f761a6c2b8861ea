// The one place that names the device copiers (transport/device_memory.hpp):
// "cuda" where this binary was built with the CUDA toolkit, and "host" (host
// memory handled as device memory: runs the device paths without a GPU).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "transport/device_memory.hpp"

namespace kvferry::transport {

/// Makes copier `name` for GPU `device` (ignored by "host"). invalid_argument
/// naming the copiers built in for an unknown name; io_error saying why where
/// "cuda" is built but no GPU can be used.
result<std::shared_ptr<device_copier>> make_device_copier(std::string_view name, int device = 0);

/// The copiers built into this binary.
std::vector<std::string> device_copier_names();

}  // namespace kvferry::transport
