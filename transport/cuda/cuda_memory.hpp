// Memory and streams for the CUDA data plane: device regions (cudaMalloc),
// pinned host regions (cudaHostAlloc) and streams, each owned by one RAII
// object. No CUDA header here: a stream is the opaque CUstream_st*, which is
// exactly cudaStream_t.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "transport/status.hpp"

struct CUstream_st;

namespace kvferry::transport::cuda {

/// A CUDA stream; nullptr is the legacy default stream.
using stream_handle = CUstream_st*;

/// Device memory from cudaMalloc on the calling thread's current device,
/// freed by the destructor (which waits for work still using it, as cudaFree
/// does). Move-only.
class device_buffer {
 public:
  device_buffer() = default;
  device_buffer(device_buffer&& other) noexcept;
  device_buffer& operator=(device_buffer&& other) noexcept;
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  ~device_buffer();

  /// `bytes` of device memory (uninitialized); 0 gives an empty buffer.
  /// io_error naming cudaMalloc and the size when the device refuses.
  static result<device_buffer> allocate(size_t bytes);

  std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  /// Device addresses: pass to kernels and cudaMemcpy, never dereference.
  std::span<std::byte> span() const { return {data_, size_}; }

 private:
  device_buffer(std::byte* p, size_t n) : data_(p), size_(n) {}

  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

/// Page-locked host memory from cudaHostAlloc (cudaHostAllocPortable: usable
/// from every device), freed with cudaFreeHost. Move-only. The bytes are host
/// memory and may be read and written directly.
class pinned_buffer {
 public:
  pinned_buffer() = default;
  pinned_buffer(pinned_buffer&& other) noexcept;
  pinned_buffer& operator=(pinned_buffer&& other) noexcept;
  pinned_buffer(const pinned_buffer&) = delete;
  pinned_buffer& operator=(const pinned_buffer&) = delete;
  ~pinned_buffer();

  /// `bytes` of pinned host memory; 0 gives an empty buffer.
  static result<pinned_buffer> allocate(size_t bytes);

  std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  std::span<std::byte> span() const { return {data_, size_}; }

 private:
  pinned_buffer(std::byte* p, size_t n) : data_(p), size_(n) {}

  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

/// A non-blocking stream (cudaStreamNonBlocking), destroyed with its owner.
class stream {
 public:
  stream() = default;
  stream(stream&& other) noexcept;
  stream& operator=(stream&& other) noexcept;
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;
  ~stream();

  static result<stream> create();

  stream_handle handle() const { return handle_; }
  /// Waits for everything queued on the stream; reports a failed kernel or copy.
  status synchronize() const;

 private:
  explicit stream(stream_handle h) : handle_(h) {}

  stream_handle handle_ = nullptr;
};

/// A synchronous copy between any two addresses CUDA knows (device, pinned or
/// pageable host; cudaMemcpyDefault). For tests, setup and benchmarks.
status copy_bytes(void* dst, const void* src, size_t bytes);

/// Sets `bytes` of device memory at `dst` to `value`, synchronously.
status fill_bytes(void* dst, int value, size_t bytes);

}  // namespace kvferry::transport::cuda
