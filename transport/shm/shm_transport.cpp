#include "transport/shm/shm_transport.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdio>

#include "transport/base/socket_backend.hpp"
#include "transport/shared_memory.hpp"
#include "transport/shm/shm_device_handles.hpp"
#include "transport/shm/shm_pins.hpp"
#include "transport/shm/shm_receiver.hpp"
#include "transport/shm/shm_sender.hpp"
#include "transport/shm/shm_wire.hpp"

namespace kvferry::transport::shm {

namespace {

constexpr std::string_view scheme = "shm://";

std::string unique_socket_name() {
  static std::atomic<uint64_t> counter{0};
  return "kvferry-shm-" + std::to_string(::getpid()) + "-" + std::to_string(++counter);
}

std::string address_text(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%p", p);
  return buf;
}

class shm_transport final : public socket_backend<shm_sender, shm_receiver> {
 public:
  shm_transport(std::string socket_name, std::shared_ptr<device_copier> device, bool trust)
      : socket_backend(trust), socket_name_(std::move(socket_name)), device_(std::move(device)) {}

  /// Second step of construction: the receiver refers to the tables.
  status listen() {
    auto r =
        shm_receiver::start(socket_name_, endpoint(), regions_, fences_, key_, pins_, handles_);
    if (!r.ok())
      return r.error();
    receiver_ = std::move(r).value();
    return {};
  }

  ~shm_transport() override { stop_io(); }

  std::string_view name() const override { return "shm"; }

  caps capabilities() const override {
    // One sender thread per peer copies batches, and the ops of each, in post order.
    return caps{.ordered_writes = true};
  }

  std::string endpoint() const override { return std::string{scheme} + socket_name_; }

  using transport::register_region;

  result<region_id> register_region(void* base, uint64_t length, memory_kind kind) override {
    if (kind == memory_kind::device)
      return register_device(base, length);
    if (base != nullptr && length > 0 && !find_shared_backing(base, length))
      return status::invalid_argument(
          "shm: region of " + std::to_string(length) + " B at " + address_text(base) +
          " is not in memfd-backed shared memory, expected memory from "
          "transport::shared_memory::allocate (peers map the region to write into it)");
    return regions_.add(base, length);
  }

  status deregister_region(region_id id) override {
    // No new batch is admitted into it after remove(); the ones admitted before
    // may still be copying in their senders' processes.
    if (auto st = regions_.remove(id); !st.ok())
      return st;
    pins_.wait_unpinned(id);
    handles_.remove(id);
    return {};
  }

  using transport::connect;

  result<peer_id> connect(const std::string& endpoint, const std::string& credential) override {
    if (endpoint.rfind(scheme, 0) != 0 || endpoint.size() == scheme.size() ||
        endpoint.size() - scheme.size() > max_socket_name)
      return status::invalid_argument(
          "endpoint '" + endpoint + "', expected shm://<name> of 1 to " +
          std::to_string(max_socket_name) + " characters for the shm backend");
    return senders_.add(
        std::make_unique<shm_sender>(endpoint.substr(scheme.size()), endpoint,
                                     sender_identity{this->endpoint(), credential, endpoint},
                                     regions_, device_.get(), senders_.relay()));
  }

 private:
  /// Device memory is not in a memfd: peers map it by the copier's handle
  /// (CUDA IPC), made here once.
  result<region_id> register_device(void* base, uint64_t length) {
    if (!device_)
      return status::invalid_argument(
          "shm: a region of " + std::to_string(length) +
          " B in device memory, and no device copier (options::device) to share it with peers");
    auto handle = device_->export_shared(base, length);
    if (!handle.ok())
      return handle.error();
    if (handle->size() > max_device_handle)
      return status::invalid_argument("shm: a device handle of " + std::to_string(handle->size()) +
                                      " B, at most " + std::to_string(max_device_handle));
    auto id = regions_.add(base, length, memory_kind::device);
    if (id.ok())
      handles_.add(*id, std::move(handle).value());
    return id;
  }

  const std::string socket_name_;
  const std::shared_ptr<device_copier> device_;
  region_table regions_;
  shm_pins pins_;
  shm_device_handles handles_;
};

}  // namespace

result<std::unique_ptr<transport>> make_shm_transport(const options& opts) {
  auto t =
      std::make_unique<shm_transport>(unique_socket_name(), opts.device, opts.trust_every_peer);
  if (auto st = t->listen(); !st.ok())
    return st;
  return std::unique_ptr<transport>{std::move(t)};
}

}  // namespace kvferry::transport::shm
