// The receiving half of the verbs backend: accepts side-channel connections,
// gives each its own RC queue pair connected to the sender's, and admits each
// batch (fence open, every op inside a registered region) before the sender
// may write it, telling the sender, for each op, the remote address and the
// rkey to write with: with memory windows (verbs_options::windows), those of
// windows over exactly the batch's bytes, bound to this connection's queue
// pair and invalidated when the batch ends, before its regions are unpinned;
// without, the whole region's. A connection that ends moves its queue pair
// to the error state before it releases what its batches held, so nothing of
// them lands later.
#pragma once

#include <memory>
#include <string>

#include "transport/base/fence_table.hpp"
#include "transport/base/peer_auth.hpp"
#include "transport/base/tcp_acceptor.hpp"
#include "transport/verbs/verbs_device.hpp"
#include "transport/verbs/verbs_regions.hpp"

namespace kvferry::transport::verbs {

/// How many memory windows a receiver connection binds (verbs_options).
struct window_limits {
  uint32_t per_batch = 0;
  uint32_t per_connection = 0;
};

class verbs_receiver {
 public:
  /// Listens on host:port for side channels. A sender gets a queue pair,
  /// and the addresses and rkeys of regions, only after it proved a
  /// credential of `key`. `regions`, `fences` and `key` must outlive the
  /// receiver.
  /// With regions.windows(), each connection binds at most
  /// `limits.per_batch` windows for one batch and holds at most
  /// `limits.per_connection` at once.
  static result<std::unique_ptr<verbs_receiver>> start(std::shared_ptr<device> dev,
                                                       const std::string& host, uint16_t port,
                                                       verbs_regions& regions, fence_table& fences,
                                                       const peer_key& key, window_limits limits);

  verbs_receiver(const verbs_receiver&) = delete;
  verbs_receiver& operator=(const verbs_receiver&) = delete;

  /// Closes the listener and every connection (their queue pairs too).
  ~verbs_receiver();

  uint16_t port() const { return acceptor_->port(); }

  /// "verbs://host:port": where senders connect.
  const std::string& endpoint() const { return acceptor_->endpoint(); }

  /// Closes every connection from the sender named `endpoint`.
  void disconnect(const std::string& endpoint) { acceptor_->disconnect(endpoint); }

 private:
  using connection = tcp_acceptor::connection;

  verbs_receiver(std::shared_ptr<device> dev, std::unique_ptr<tcp_acceptor> acceptor,
                 verbs_regions& regions, fence_table& fences, const peer_key& key,
                 window_limits limits);

  void serve(connection& conn);

  std::shared_ptr<device> dev_;
  verbs_regions& regions_;
  fence_table& fences_;
  const peer_key& key_;
  const window_limits limits_;
  const std::unique_ptr<tcp_acceptor> acceptor_;
};

}  // namespace kvferry::transport::verbs
