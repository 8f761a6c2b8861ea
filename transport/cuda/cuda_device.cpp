#include "transport/cuda/cuda_device.hpp"

#include <mutex>

#include "transport/cuda/cuda_check.hpp"

namespace kvferry::transport::cuda {

namespace {

status probe() {
  // Where libcudart is present but no driver is, this is the first call to
  // fail (cudaErrorInsufficientDriver or cudaErrorNoDevice): nothing crashes.
  int count = 0;
  KVFERRY_CUDA_TRY("cudaGetDeviceCount", cudaGetDeviceCount(&count));
  if (count == 0)
    return status::io_error("cudaGetDeviceCount: no CUDA device is visible to this process");
  // A device whose architecture neither the sm_90 code nor the PTX can run on
  // fails here rather than at the first kernel launch.
  KVFERRY_CUDA_TRY("cudaFree(nullptr) (context creation)", cudaFree(nullptr));
  return check_kernel_image();
}

}  // namespace

status cuda_available() {
  static std::once_flag once;
  static status answer;
  std::call_once(once, [] { answer = probe(); });
  return answer;
}

result<device_info> describe_device(int index) {
  if (auto st = cuda_available(); !st.ok())
    return st;
  device_info info;
  KVFERRY_CUDA_TRY("cudaGetDeviceCount", cudaGetDeviceCount(&info.device_count));
  cudaDeviceProp prop{};
  KVFERRY_CUDA_TRY("cudaGetDeviceProperties(" + std::to_string(index) + ")",
                   cudaGetDeviceProperties(&prop, index));
  info.index = index;
  info.name = prop.name;
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  info.total_memory = prop.totalGlobalMem;
  info.multiprocessors = prop.multiProcessorCount;
  return info;
}

}  // namespace kvferry::transport::cuda
