#include "transport/verbs/verbs_transport.hpp"

#include <iostream>
#include <mutex>
#include <string>

#include "transport/base/socket_backend.hpp"
#include "transport/verbs/verbs_device.hpp"
#include "transport/verbs/verbs_options.hpp"
#include "transport/verbs/verbs_receiver.hpp"
#include "transport/verbs/verbs_regions.hpp"
#include "transport/verbs/verbs_sender.hpp"

namespace kvferry::transport::verbs {

namespace {

/// "verbs://host:port" → the side channel's address.
result<host_port> parse_endpoint(const std::string& endpoint) {
  constexpr std::string_view scheme = "verbs://";
  if (endpoint.rfind(scheme, 0) != 0)
    return status::invalid_argument("endpoint '" + endpoint +
                                    "', expected verbs://<host>:<port> for the verbs backend");
  auto where = kvferry::transport::parse_endpoint("tcp://" + endpoint.substr(scheme.size()));
  if (!where.ok())
    return status::invalid_argument("endpoint '" + endpoint +
                                    "', expected verbs://<host>:<port> for the verbs backend");
  return where;
}

/// Whether regions are written through memory windows only, from
/// verbs_options::windows and what `dev` can do.
result<bool> use_windows(const verbs_options& own, const device& dev) {
  if (own.windows == windows_mode::off)
    return false;
  if (own.max_windows_per_batch == 0 || own.max_windows_per_connection < own.max_windows_per_batch)
    return status::invalid_argument(
        "verbs: max_windows_per_batch " + std::to_string(own.max_windows_per_batch) +
        " and max_windows_per_connection " + std::to_string(own.max_windows_per_connection) +
        ", expected 0 < per batch <= per connection");
  if (dev.memory_windows)
    return true;
  std::string why = "device " + dev.name +
                    " has no type-2B memory windows (device_cap_flags lacks "
                    "IBV_DEVICE_MEM_WINDOW_TYPE_2B, or ibv_alloc_mw failed)";
  if (own.windows == windows_mode::required)
    return status::invalid_argument("verbs: " + why + ", and verbs_options::windows is required");
  static std::once_flag warned;
  std::call_once(warned, [&] {
    std::cerr << "kvferry: warning: verbs: " << why
              << ": senders are told whole regions' rkeys and can write anywhere in a region "
                 "they were granted once (verbs_options::windows = preferred)"
              << std::endl;
  });
  return false;
}

class verbs_transport final : public socket_backend<verbs_sender, verbs_receiver> {
 public:
  verbs_transport(std::shared_ptr<device> dev, std::string host, bool trust, bool windows,
                  window_limits limits)
      : socket_backend(trust),
        dev_(std::move(dev)),
        host_(std::move(host)),
        limits_(limits),
        regions_(dev_, windows) {}

  status listen(uint16_t port) {
    auto r = verbs_receiver::start(dev_, host_, port, regions_, fences_, key_, limits_);
    if (!r.ok())
      return r.error();
    receiver_ = std::move(r).value();
    return {};
  }

  ~verbs_transport() override { stop_io(); }

  std::string_view name() const override { return "verbs"; }

  caps capabilities() const override {
    // Not ordered: RDMA WRITE placement order at the target is not promised
    // by the verbs spec, only that a completion covers the requests before it.
    // Device memory: any pointer is handed to ibv_reg_mr; GPU memory works
    // only where a peer-memory client (nvidia_peermem) is loaded.
    return caps{.ordered_writes = false,
                .device_memory = dev_->device_memory,
                .max_write_bytes = UINT64_MAX};
  }

  std::string endpoint() const override { return receiver_->endpoint(); }

  using transport::connect;
  using transport::register_region;

  /// Device memory is handed to the NIC as it is (GPUDirect RDMA): the
  /// registration fails, naming ibv_reg_mr's error, where the driver cannot
  /// pin GPU memory (nvidia-peermem not loaded, no dma-buf support).
  result<region_id> register_region(void* base, uint64_t length, memory_kind kind) override {
    return regions_.add(base, length, kind);
  }

  status deregister_region(region_id id) override { return regions_.remove(id); }

  result<peer_id> connect(const std::string& endpoint, const std::string& credential) override {
    auto where = parse_endpoint(endpoint);
    if (!where.ok())
      return where.error();
    auto sender = verbs_sender::start(dev_, std::move(where).value(), endpoint,
                                      sender_identity{this->endpoint(), credential, endpoint},
                                      regions_, senders_.relay());
    if (!sender.ok())
      return sender.error();
    return senders_.add(std::move(sender).value());
  }

 private:
  std::shared_ptr<device> dev_;
  const std::string host_;
  const window_limits limits_;
  verbs_regions regions_;
};

}  // namespace

result<std::unique_ptr<transport>> make_verbs_transport(const options& opts) {
  auto& own = opts.backend<verbs_options>();
  auto dev = open_device(own.device, own.port, own.gid_index);
  if (!dev.ok())
    return dev.error();
  auto windows = use_windows(own, **dev);
  if (!windows.ok())
    return windows.error();
  auto t = std::make_unique<verbs_transport>(
      std::move(dev).value(), opts.listen_host, opts.trust_every_peer, *windows,
      window_limits{own.max_windows_per_batch, own.max_windows_per_connection});
  if (auto st = t->listen(opts.listen_port); !st.ok())
    return st;
  return std::unique_ptr<transport>{std::move(t)};
}

}  // namespace kvferry::transport::verbs
