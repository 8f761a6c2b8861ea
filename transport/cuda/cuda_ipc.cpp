#include "transport/cuda/cuda_ipc.hpp"

#include <cstring>
#include <string>
#include <utility>

#include "transport/cuda/cuda_check.hpp"

namespace kvferry::transport::cuda {

static_assert(sizeof(cudaIpcMemHandle_t) == sizeof(ipc_handle),
              "ipc_handle must hold a cudaIpcMemHandle_t exactly");

result<ipc_handle> export_ipc_handle(const device_buffer& buf) {
  if (buf.data() == nullptr)
    return status::invalid_argument("export_ipc_handle: an empty device_buffer has no handle");
  cudaIpcMemHandle_t h{};
  KVFERRY_CUDA_TRY("cudaIpcGetMemHandle(" + std::to_string(buf.size()) + " B)",
                   cudaIpcGetMemHandle(&h, buf.data()));
  ipc_handle out;
  std::memcpy(out.data(), &h, sizeof(h));
  return out;
}

result<ipc_handle> ipc_handle_from_bytes(std::span<const std::byte> bytes) {
  ipc_handle out;
  if (bytes.size() != out.size())
    return status::invalid_argument("ipc handle of " + std::to_string(bytes.size()) +
                                    " B, expected " + std::to_string(out.size()) + " B");
  std::memcpy(out.data(), bytes.data(), out.size());
  return out;
}

ipc_mapping::ipc_mapping(ipc_mapping&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

ipc_mapping& ipc_mapping::operator=(ipc_mapping&& other) noexcept {
  if (this != &other) {
    ipc_mapping old{std::move(*this)};
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

ipc_mapping::~ipc_mapping() {
  if (data_)
    cudaIpcCloseMemHandle(data_);
}

result<ipc_mapping> ipc_mapping::open(const ipc_handle& handle, size_t size) {
  cudaIpcMemHandle_t h{};
  std::memcpy(&h, handle.data(), sizeof(h));
  void* p = nullptr;
  KVFERRY_CUDA_TRY("cudaIpcOpenMemHandle(" + std::to_string(size) + " B)",
                   cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess));
  return ipc_mapping{static_cast<std::byte*>(p), size};
}

}  // namespace kvferry::transport::cuda
