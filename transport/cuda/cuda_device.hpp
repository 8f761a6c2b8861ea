// Is there a CUDA device this process can use, and what is it. The probe never
// crashes where the toolkit is present but the driver or the GPU is not: it
// says why in the status instead (tests print it after "SKIPPED:").
#pragma once

#include <cstdint>
#include <string>

#include "transport/status.hpp"

namespace kvferry::transport::cuda {

/// One device as cudaGetDeviceProperties sees it.
struct device_info {
  int index = 0;
  std::string name;  ///< "NVIDIA H200"
  int cc_major = 0;  ///< compute capability, 9 for sm_90
  int cc_minor = 0;
  uint64_t total_memory = 0;  ///< bytes
  int multiprocessors = 0;
  int device_count = 0;  ///< devices visible to this process
};

/// OK where at least one device can run kernels; otherwise io_error saying why:
/// no driver ("cudaGetDeviceCount: CUDA driver version is insufficient ..."),
/// no device, or a device this build's code (sm_90 + PTX) cannot run on.
/// Any thread; the answer is computed once per process.
status cuda_available();

/// The description of device `index` (io_error where CUDA is not available).
result<device_info> describe_device(int index = 0);

}  // namespace kvferry::transport::cuda
