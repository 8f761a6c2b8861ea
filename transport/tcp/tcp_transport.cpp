#include "transport/tcp/tcp_transport.hpp"

#include <algorithm>

#include "transport/base/socket_backend.hpp"
#include "transport/tcp/tcp_options.hpp"
#include "transport/tcp/tcp_receiver.hpp"
#include "transport/tcp/tcp_sender.hpp"

namespace kvferry::transport::tcp {

namespace {

/// More connections per peer than this buys nothing and costs threads.
constexpr uint32_t max_streams = 16;

class tcp_transport final : public socket_backend<tcp_sender, tcp_receiver> {
 public:
  tcp_transport(const options& opts, std::unique_ptr<region_table> regions)
      : socket_backend(opts.trust_every_peer),
        host_(opts.listen_host),
        streams_(std::clamp<uint32_t>(opts.backend<tcp_options>().streams, 1, max_streams)),
        tuning_{opts.backend<tcp_options>().socket_buffer,
                opts.backend<tcp_options>().user_timeout_ms},
        device_(opts.device),
        regions_(std::move(regions)) {}

  /// Second step of construction: the receiver refers to regions_.
  status listen(uint16_t port) {
    auto r = tcp_receiver::start(host_, port, tuning_, *regions_, fences_, key_, device_);
    if (!r.ok())
      return r.error();
    receiver_ = std::move(r).value();
    return {};
  }

  ~tcp_transport() override { stop_io(); }

  std::string_view name() const override { return "tcp"; }

  caps capabilities() const override {
    // Several streams per peer, but every byte has its stream and completions
    // are delivered in post order (tcp_sender.hpp): what callers can observe
    // is ordered as on one stream.
    return caps{.ordered_writes = true};
  }

  std::string endpoint() const override { return receiver_->endpoint(); }

  using transport::connect;
  using transport::register_region;

  result<region_id> register_region(void* base, uint64_t length, memory_kind kind) override {
    if (kind == memory_kind::device && !device_)
      return status::invalid_argument(
          "tcp: a region of " + std::to_string(length) +
          " B in device memory, and no device copier (options::device) to move it through "
          "host memory");
    return regions_->add(base, length, kind);
  }

  status deregister_region(region_id id) override { return regions_->remove(id); }

  result<peer_id> connect(const std::string& endpoint, const std::string& credential) override {
    auto where = parse_endpoint(endpoint);
    if (!where.ok())
      return where.error();
    return senders_.add(std::make_unique<tcp_sender>(
        std::move(where).value(), endpoint, sender_identity{this->endpoint(), credential, endpoint},
        *regions_, device_.get(), streams_, tuning_, senders_.relay()));
  }

 private:
  const std::string host_;
  const uint32_t streams_;
  const socket_tuning tuning_;
  const std::shared_ptr<device_copier> device_;
  std::unique_ptr<region_table> regions_;
};

}  // namespace

result<std::unique_ptr<transport>> make_tcp_transport(const options& opts) {
  auto t = std::make_unique<tcp_transport>(opts, std::make_unique<region_table>());
  if (auto st = t->listen(opts.listen_port); !st.ok())
    return st;
  return std::unique_ptr<transport>{std::move(t)};
}

}  // namespace kvferry::transport::tcp
