#include "transport/cuda/cuda_device_copier.hpp"

#include <unistd.h>

#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "transport/base/process_nonce.hpp"
#include "transport/cuda/cuda_check.hpp"
#include "transport/cuda/cuda_device.hpp"
#include "transport/cuda/cuda_memory.hpp"
#include "transport/cuda/cuda_segment_copy.hpp"

namespace kvferry::transport::cuda {

namespace {

/// What export_shared() hands out: the allocation's IPC handle, where the
/// region starts in it and how long it is, and the exporting process (a
/// process cannot open its own handle; it uses the address instead). A pid
/// alone does not name a process across pid namespaces (two containers may
/// both be pid 1): a random number drawn once per process goes with it.
struct shared_handle {
  cudaIpcMemHandle_t ipc;
  uint64_t offset = 0;   ///< of the region's base in its allocation
  uint64_t bytes = 0;    ///< of the region
  uint64_t address = 0;  ///< the base in the exporter's address space
  uint64_t process = 0;  ///< this_process()
  uint32_t pid = 0;
  uint32_t magic = 0x4B564443;  // "KVDC"
};

/// The allocation `p` lies in: cuMemGetAddressRange through the runtime's
/// driver entry point (no link against libcuda).
status allocation_of(const void* p, uintptr_t& base, uint64_t& size) {
  using get_range = int (*)(unsigned long long*, size_t*, unsigned long long);
  static get_range fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found{};
#if CUDART_VERSION >= 12050
    auto rc = cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &f, 12000, cudaEnableDefault,
                                               &found);
#else
    auto rc = cudaGetDriverEntryPoint("cuMemGetAddressRange", &f, cudaEnableDefault, &found);
#endif
    if (rc != cudaSuccess || found != cudaDriverEntryPointSuccess)
      f = nullptr;
    return reinterpret_cast<get_range>(f);
  }();
  if (!fn)
    return status::io_error("cuMemGetAddressRange is not available from this driver");
  unsigned long long b = 0;
  size_t n = 0;
  if (int rc = fn(&b, &n, reinterpret_cast<uintptr_t>(p)); rc != 0)
    return status::io_error("cuMemGetAddressRange of a device region failed (CUresult " +
                            std::to_string(rc) + "): not device memory of this process?");
  base = static_cast<uintptr_t>(b);
  size = n;
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

  /// On a stream of the copier's, waited for: cudaMemcpy alone returns before
  /// a device-to-device (or pageable-to-device) copy is done, and queues
  /// behind the engine's work on the legacy stream.
  status copy(void* dst, const void* src, uint64_t bytes) override {
    if (bytes == 0)
      return {};
    KVFERRY_CUDA_TRY("cudaSetDevice", cudaSetDevice(device_));
    auto s = take_stream();
    if (!s.ok())
      return s.error();
    auto st = [&]() -> status {
      KVFERRY_CUDA_TRY("cudaMemcpyAsync(" + std::to_string(bytes) + " B)",
                       cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (*s)->handle()));
      return (*s)->synchronize();
    }();
    give_back(std::move(s).value());
    return st;
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
    // The kernel is handed the host address itself: that needs a device that
    // maps registered memory at the same address (unified addressing).
    void* on_device = nullptr;
    auto e = cudaHostGetDevicePointer(&on_device, base, 0);
    if (e != cudaSuccess || on_device != base) {
      cudaHostUnregister(base);
      if (e != cudaSuccess)
        return cuda_failure("cudaHostGetDevicePointer", e);
      return status::io_error("pinned host memory is mapped at another device address on GPU " +
                              std::to_string(device_) +
                              ": the segment kernel cannot reach it by its host address");
    }
    return {};
  }

  void unpin_host(void* base) override {
    cudaSetDevice(device_);
    cudaHostUnregister(base);
  }

  result<std::vector<std::byte>> export_shared(void* base, uint64_t bytes) override {
    KVFERRY_CUDA_TRY("cudaSetDevice", cudaSetDevice(device_));
    uintptr_t alloc = 0;
    uint64_t alloc_bytes = 0;
    if (auto st = allocation_of(base, alloc, alloc_bytes); !st.ok())
      return st;
    auto offset = reinterpret_cast<uintptr_t>(base) - alloc;
    if (offset > alloc_bytes || bytes > alloc_bytes - offset)
      return status::invalid_argument(
          "a device region of " + std::to_string(bytes) + " B at offset " + std::to_string(offset) +
          " of an allocation of " + std::to_string(alloc_bytes) +
          " B: a region shared with another process must lie in one cudaMalloc");
    shared_handle h{};
    h.magic = shared_handle{}.magic;
    KVFERRY_CUDA_TRY("cudaIpcGetMemHandle(" + std::to_string(bytes) + " B)",
                     cudaIpcGetMemHandle(&h.ipc, reinterpret_cast<void*>(alloc)));
    h.offset = offset;
    h.bytes = bytes;
    h.address = reinterpret_cast<uintptr_t>(base);
    h.process = this_process();
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
    if (bytes > h.bytes)
      return status::out_of_bounds("opening " + std::to_string(bytes) +
                                   " B of a shared device region of " + std::to_string(h.bytes) +
                                   " B");
    if (h.process == this_process() && h.pid == static_cast<uint32_t>(::getpid()))
      // Our own memory: CUDA refuses to open it, and needs not.
      return std::shared_ptr<std::byte>{reinterpret_cast<std::byte*>(h.address), [](std::byte*) {}};
    void* mapped = nullptr;
    KVFERRY_CUDA_TRY("cudaIpcOpenMemHandle(" + std::to_string(bytes) + " B)",
                     cudaIpcOpenMemHandle(&mapped, h.ipc, cudaIpcMemLazyEnablePeerAccess));
    auto device = device_;
    auto close = [mapped, device] {
      cudaSetDevice(device);
      cudaIpcCloseMemHandle(mapped);
    };
    // The mapping is the whole allocation: the region must lie inside it.
    uintptr_t alloc = 0;
    uint64_t alloc_bytes = 0;
    auto st = allocation_of(mapped, alloc, alloc_bytes);
    if (st.ok() && (h.offset > alloc_bytes || bytes > alloc_bytes - h.offset))
      st = status::out_of_bounds("a shared device region of " + std::to_string(bytes) +
                                 " B at offset " + std::to_string(h.offset) +
                                 " past the mapped allocation of " + std::to_string(alloc_bytes) +
                                 " B");
    if (!st.ok()) {
      close();
      return st;
    }
    return std::shared_ptr<std::byte>{static_cast<std::byte*>(mapped) + h.offset,
                                      [close](std::byte*) { close(); }};
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

  result<std::unique_ptr<stream>> take_stream() {
    {
      std::lock_guard guard{pool_mu_};
      if (!idle_streams_.empty()) {
        auto s = std::move(idle_streams_.back());
        idle_streams_.pop_back();
        return s;
      }
    }
    auto made = stream::create();
    if (!made.ok())
      return made.error();
    return std::make_unique<stream>(std::move(made).value());
  }

  void give_back(std::unique_ptr<stream> s) {
    std::lock_guard guard{pool_mu_};
    idle_streams_.push_back(std::move(s));
  }

  const int device_;
  const bounce_pipeline::options pieces_;
  std::mutex pool_mu_;
  std::vector<std::unique_ptr<bounce_pipeline>> idle_;  ///< one per thread that used one at once
  std::vector<std::unique_ptr<stream>> idle_streams_;   ///< for copy(), likewise
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
