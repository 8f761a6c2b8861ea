#include "transport/cuda/cuda_device_copier.hpp"

#include <unistd.h>

#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "transport/cuda/cuda_check.hpp"
#include "transport/cuda/cuda_device.hpp"
#include "transport/cuda/cuda_memory.hpp"
#include "transport/cuda/cuda_segment_copy.hpp"

namespace kvferry::transport::cuda {

namespace {

/// What export_shared() hands out: the allocation's IPC handle, where the
/// region starts in it, and the exporting process (a process cannot open its
/// own handle; it uses the address instead).
struct shared_handle {
  cudaIpcMemHandle_t ipc;
  uint64_t offset = 0;   ///< of the region's base in its allocation
  uint64_t address = 0;  ///< the base in the exporter's address space
  uint32_t pid = 0;
  uint32_t magic = 0x4B564443;  // "KVDC"
};

/// cuMemGetAddressRange through the runtime's driver entry point (no link
/// against libcuda): the allocation `p` lies in.
status allocation_base(const void* p, uintptr_t& base) {
  using get_range = int (*)(unsigned long long*, size_t*, unsigned long long);
  static get_range fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &f, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      f = nullptr;
    return reinterpret_cast<get_range>(f);
  }();
  if (!fn)
    return status::io_error("cuMemGetAddressRange is not available from this driver");
  unsigned long long b = 0;
  size_t size = 0;
  if (int rc = fn(&b, &size, reinterpret_cast<uintptr_t>(p)); rc != 0)
    return status::io_error("cuMemGetAddressRange of a device region failed (CUresult " +
                            std::to_string(rc) + "): not device memory of this process?");
  base = static_cast<uintptr_t>(b);
  return {};
}

class cuda_device_copier final : public device_copier {
 public:
  cuda_device_copier(int device, bounce_pipeline::options pieces, stream s)
      : device_(device), pieces_(pieces), segments_stream_(std::move(s)) {}

  std::string_view name() const override { return "cuda"; }

  status read(const std::byte* src, uint64_t bytes, const read_piece& on_piece) override {
    KVFERRY_CUDA_TRY("cudaSetDevice", cudaSetDevice(device_));
    auto p = take();
    if (!p.ok())
      return p.error();
    auto st = (*p)->drain(src, bytes, on_piece);
    give_back(std::move(p).value());
    return st;
  }

  status write(std::byte* dst, uint64_t bytes, const fill_piece& fill) override {
    KVFERRY_CUDA_TRY("cudaSetDevice", cudaSetDevice(device_));
    auto p = take();
    if (!p.ok())
      return p.error();
    auto st = (*p)->fill(dst, bytes, fill);
    give_back(std::move(p).value());
    return st;
  }

  status copy(void* dst, const void* src, uint64_t bytes) override {
    if (bytes == 0)
      return {};
    KVFERRY_CUDA_TRY("cudaSetDevice", cudaSetDevice(device_));
    KVFERRY_CUDA_TRY("cudaMemcpy(" + std::to_string(bytes) + " B)",
                     cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
    return {};
  }

  status copy_segments(std::span<std::byte> dst, std::span<const std::byte> src,
                       std::span<const copy_segment> segments) override {
    std::lock_guard guard{segments_mu_};
    KVFERRY_CUDA_TRY("cudaSetDevice", cudaSetDevice(device_));
    if (auto st = cuda::copy_segments(dst, src, segments, segments_stream_.handle()); !st.ok())
      return st;
    return segments_stream_.synchronize();
  }

  status pin_host(void* base, uint64_t bytes) override {
    KVFERRY_CUDA_TRY("cudaSetDevice", cudaSetDevice(device_));
    KVFERRY_CUDA_TRY(
        "cudaHostRegister(" + std::to_string(bytes) + " B)",
        cudaHostRegister(base, bytes, cudaHostRegisterPortable | cudaHostRegisterMapped));
    return {};
  }

  void unpin_host(void* base) override { cudaHostUnregister(base); }

  result<std::vector<std::byte>> export_shared(void* base, uint64_t bytes) override {
    KVFERRY_CUDA_TRY("cudaSetDevice", cudaSetDevice(device_));
    uintptr_t alloc = 0;
    if (auto st = allocation_base(base, alloc); !st.ok())
      return st;
    shared_handle h{};
    h.magic = shared_handle{}.magic;
    KVFERRY_CUDA_TRY("cudaIpcGetMemHandle(" + std::to_string(bytes) + " B)",
                     cudaIpcGetMemHandle(&h.ipc, reinterpret_cast<void*>(alloc)));
    h.offset = reinterpret_cast<uintptr_t>(base) - alloc;
    h.address = reinterpret_cast<uintptr_t>(base);
    h.pid = static_cast<uint32_t>(::getpid());
    std::vector<std::byte> out(sizeof(h));
    std::memcpy(out.data(), &h, sizeof(h));
    return out;
  }

  result<std::shared_ptr<std::byte>> open_shared(std::span<const std::byte> handle,
                                                 uint64_t bytes) override {
    KVFERRY_CUDA_TRY("cudaSetDevice", cudaSetDevice(device_));
    shared_handle h{};
    if (handle.size() != sizeof(h))
      return status::invalid_argument("a CUDA shared handle of " + std::to_string(handle.size()) +
                                      " B, expected " + std::to_string(sizeof(h)));
    std::memcpy(&h, handle.data(), sizeof(h));
    if (h.magic != shared_handle{}.magic)
      return status::invalid_argument("not a CUDA shared handle (wrong magic)");
    if (h.pid == static_cast<uint32_t>(::getpid()))
      // Our own memory: CUDA refuses to open it, and needs not.
      return std::shared_ptr<std::byte>{reinterpret_cast<std::byte*>(h.address), [](std::byte*) {}};
    void* mapped = nullptr;
    KVFERRY_CUDA_TRY("cudaIpcOpenMemHandle(" + std::to_string(bytes) + " B)",
                     cudaIpcOpenMemHandle(&mapped, h.ipc, cudaIpcMemLazyEnablePeerAccess));
    return std::shared_ptr<std::byte>{static_cast<std::byte*>(mapped) + h.offset,
                                      [mapped](std::byte*) { cudaIpcCloseMemHandle(mapped); }};
  }

 private:
  result<std::unique_ptr<bounce_pipeline>> take() {
    {
      std::lock_guard guard{pool_mu_};
      if (!idle_.empty()) {
        auto p = std::move(idle_.back());
        idle_.pop_back();
        return p;
      }
    }
    auto made = bounce_pipeline::create(pieces_);
    if (!made.ok())
      return made.error();
    return std::make_unique<bounce_pipeline>(std::move(made).value());
  }

  void give_back(std::unique_ptr<bounce_pipeline> p) {
    std::lock_guard guard{pool_mu_};
    idle_.push_back(std::move(p));
  }

  const int device_;
  const bounce_pipeline::options pieces_;
  std::mutex pool_mu_;
  std::vector<std::unique_ptr<bounce_pipeline>> idle_;  ///< one per thread that used one at once
  std::mutex segments_mu_;
  stream segments_stream_;
};

}  // namespace

result<std::shared_ptr<device_copier>> make_cuda_device_copier(int device,
                                                               bounce_pipeline::options pieces) {
  if (auto st = cuda_available(); !st.ok())
    return st;
  if (auto st = describe_device(0); st.ok() && (device < 0 || device >= st->device_count))
    return status::invalid_argument("CUDA device " + std::to_string(device) + ", expected 0 to " +
                                    std::to_string(st->device_count - 1));
  KVFERRY_CUDA_TRY("cudaSetDevice(" + std::to_string(device) + ")", cudaSetDevice(device));
  auto s = stream::create();
  if (!s.ok())
    return s.error();
  return std::shared_ptr<device_copier>{
      std::make_shared<cuda_device_copier>(device, pieces, std::move(s).value())};
}

}  // namespace kvferry::transport::cuda
