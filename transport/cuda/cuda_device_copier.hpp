// The device_copier of a GPU (transport/device_memory.hpp): reads and writes of
// device memory through pooled bounce_pipelines (pinned pieces, copies
// overlapped with the socket), any-to-any copies with cudaMemcpy, staging's
// gather and scatter with the segment-copy kernel, pinned and mapped host
// memory for it, and CUDA IPC handles for the shm backend.
#pragma once

#include <memory>

#include "transport/cuda/cuda_bounce.hpp"
#include "transport/device_memory.hpp"

namespace kvferry::transport::cuda {

/// Makes the copier for device `device` (where cuda_available(); the status
/// of the probe otherwise). Every call makes `device` current on the calling
/// thread first: the transports' threads copy on the rank's GPU. Thread-safe.
result<std::shared_ptr<device_copier>> make_cuda_device_copier(
    int device = 0, bounce_pipeline::options pieces = {});

}  // namespace kvferry::transport::cuda
