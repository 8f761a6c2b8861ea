// Internal to transport/cuda: turns a cudaError_t into the transport's status.
// Included by the .cpp/.cu files of this folder only (it pulls in the CUDA
// runtime header, which the public headers keep out).
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "transport/status.hpp"

namespace kvferry::transport::cuda {

/// io_error naming the call and CUDA's own words:
/// "cudaMalloc(1048576 B): out of memory (cudaErrorMemoryAllocation)".
/// Clears CUDA's last-error slot so a later call does not report it again.
status cuda_failure(const std::string& call, cudaError_t err);

/// OK when the current device can run this build's kernels (sm_90 code or its
/// PTX); io_error naming cudaFuncGetAttributes otherwise. In cuda_segment_copy.cu.
status check_kernel_image();

}  // namespace kvferry::transport::cuda

/// Returns cuda_failure(what, err) from the enclosing function when `expr` fails.
#define KVFERRY_CUDA_TRY(what, expr)                                         \
  do {                                                                       \
    cudaError_t kvferry_err_ = (expr);                                       \
    if (kvferry_err_ != cudaSuccess)                                         \
      return ::kvferry::transport::cuda::cuda_failure((what), kvferry_err_); \
  } while (0)
