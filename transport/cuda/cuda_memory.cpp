#include "transport/cuda/cuda_memory.hpp"

#include <string>
#include <utility>

#include "transport/cuda/cuda_check.hpp"

namespace kvferry::transport::cuda {

// -- device_buffer ------------------------------------------------------------

device_buffer::device_buffer(device_buffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

device_buffer& device_buffer::operator=(device_buffer&& other) noexcept {
  if (this != &other) {
    device_buffer old{std::move(*this)};
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

device_buffer::~device_buffer() {
  if (data_)
    cudaFree(data_);  // a failure here is a sticky error the next call reports
}

result<device_buffer> device_buffer::allocate(size_t bytes) {
  if (bytes == 0)
    return device_buffer{};
  void* p = nullptr;
  KVFERRY_CUDA_TRY("cudaMalloc(" + std::to_string(bytes) + " B)", cudaMalloc(&p, bytes));
  return device_buffer{static_cast<std::byte*>(p), bytes};
}

// -- pinned_buffer ------------------------------------------------------------

pinned_buffer::pinned_buffer(pinned_buffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

pinned_buffer& pinned_buffer::operator=(pinned_buffer&& other) noexcept {
  if (this != &other) {
    pinned_buffer old{std::move(*this)};
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

pinned_buffer::~pinned_buffer() {
  if (data_)
    cudaFreeHost(data_);
}

result<pinned_buffer> pinned_buffer::allocate(size_t bytes) {
  if (bytes == 0)
    return pinned_buffer{};
  void* p = nullptr;
  KVFERRY_CUDA_TRY("cudaHostAlloc(" + std::to_string(bytes) + " B, cudaHostAllocPortable)",
                   cudaHostAlloc(&p, bytes, cudaHostAllocPortable));
  return pinned_buffer{static_cast<std::byte*>(p), bytes};
}

// -- stream -------------------------------------------------------------------

stream::stream(stream&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}

stream& stream::operator=(stream&& other) noexcept {
  if (this != &other) {
    stream old{std::move(*this)};
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

stream::~stream() {
  if (handle_)
    cudaStreamDestroy(handle_);
}

result<stream> stream::create() {
  cudaStream_t h = nullptr;
  KVFERRY_CUDA_TRY("cudaStreamCreateWithFlags(cudaStreamNonBlocking)",
                   cudaStreamCreateWithFlags(&h, cudaStreamNonBlocking));
  return stream{h};
}

status stream::synchronize() const {
  KVFERRY_CUDA_TRY("cudaStreamSynchronize", cudaStreamSynchronize(handle_));
  return {};
}

// -- copies -------------------------------------------------------------------

status copy_bytes(void* dst, const void* src, size_t bytes) {
  KVFERRY_CUDA_TRY("cudaMemcpy(" + std::to_string(bytes) + " B, cudaMemcpyDefault)",
                   cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
  // cudaMemcpy may return before a copy from pageable memory, or between two
  // device buffers, is done: the legacy stream it ran on is waited for.
  KVFERRY_CUDA_TRY("cudaStreamSynchronize(legacy stream)", cudaStreamSynchronize(nullptr));
  return {};
}

status fill_bytes(void* dst, int value, size_t bytes) {
  KVFERRY_CUDA_TRY("cudaMemset(" + std::to_string(bytes) + " B)", cudaMemset(dst, value, bytes));
  KVFERRY_CUDA_TRY("cudaStreamSynchronize(legacy stream)", cudaStreamSynchronize(nullptr));
  return {};
}

}  // namespace kvferry::transport::cuda
