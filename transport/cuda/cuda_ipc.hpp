// CUDA IPC between processes of one host: the owner of a device buffer exports
// its cudaIpcMemHandle as 64 bytes (sent over any control channel with the
// buffer's size), and another process opens it as a mapping of the same device
// memory. A process cannot open its own handle (CUDA refuses).
#pragma once

#include <array>
#include <cstddef>
#include <span>

#include "transport/cuda/cuda_memory.hpp"
#include "transport/status.hpp"

namespace kvferry::transport::cuda {

/// The bytes of a cudaIpcMemHandle_t.
using ipc_handle = std::array<std::byte, 64>;

/// The handle of `buf`'s allocation (cudaIpcGetMemHandle). The handle is good
/// for as long as `buf` lives; the exporter frees nothing early because a peer
/// holds a mapping, so it must keep `buf` until every peer has closed it.
result<ipc_handle> export_ipc_handle(const device_buffer& buf);

/// A handle read off the wire: invalid_argument unless exactly 64 bytes.
result<ipc_handle> ipc_handle_from_bytes(std::span<const std::byte> bytes);

/// Another process's device buffer, mapped into this one
/// (cudaIpcOpenMemHandle with cudaIpcMemLazyEnablePeerAccess); closed by the
/// destructor. Move-only.
class ipc_mapping {
 public:
  ipc_mapping() = default;
  ipc_mapping(ipc_mapping&& other) noexcept;
  ipc_mapping& operator=(ipc_mapping&& other) noexcept;
  ipc_mapping(const ipc_mapping&) = delete;
  ipc_mapping& operator=(const ipc_mapping&) = delete;
  ~ipc_mapping();

  /// Opens `handle`, whose buffer the exporter says is `size` bytes (CUDA
  /// does not tell the importer; a wrong size is not detected here).
  static result<ipc_mapping> open(const ipc_handle& handle, size_t size);

  /// Device addresses of the peer's buffer.
  std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  std::span<std::byte> span() const { return {data_, size_}; }

 private:
  ipc_mapping(std::byte* p, size_t n) : data_(p), size_(n) {}

  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace kvferry::transport::cuda
