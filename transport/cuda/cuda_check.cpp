#include "transport/cuda/cuda_check.hpp"

namespace kvferry::transport::cuda {

status cuda_failure(const std::string& call, cudaError_t err) {
  cudaGetLastError();  // clear the non-sticky error this call left behind
  return status::io_error(call + ": " + cudaGetErrorString(err) + " (" + cudaGetErrorName(err) +
                          ")");
}

}  // namespace kvferry::transport::cuda
