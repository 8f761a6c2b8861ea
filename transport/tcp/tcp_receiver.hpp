// The receiving half of the tcp backend: accepts connections from peers (a
// peer opens several, its streams; each is served on its own thread and
// knows nothing of the others) and places each batch's bytes straight into
// the registered regions, after checking every op of the batch against them.
// A batch with a bad op writes nothing and is answered with the error (a
// sender's stripe is a batch here); a peer that breaks the wire format loses
// that connection; other connections carry on. disconnect() cuts every
// stream of a peer.
#pragma once

#include <memory>
#include <string>

#include "transport/base/fence_table.hpp"
#include "transport/base/peer_auth.hpp"
#include "transport/base/region_table.hpp"
#include "transport/base/tcp_acceptor.hpp"

namespace kvferry::transport::tcp {

class tcp_receiver {
 public:
  /// Listens on host:port; accepted connections are set up by `tuning`
  /// (buffers, user timeout) and must prove a credential of `key`.
  /// `regions`, `fences` and `key` must outlive the receiver; `device` (may
  /// be null) places bytes into device regions.
  static result<std::unique_ptr<tcp_receiver>> start(const std::string& host, uint16_t port,
                                                     socket_tuning tuning,
                                                     const region_table& regions,
                                                     fence_table& fences, const peer_key& key,
                                                     std::shared_ptr<device_copier> device);

  tcp_receiver(const tcp_receiver&) = delete;
  tcp_receiver& operator=(const tcp_receiver&) = delete;

  /// Closes the listener and every connection, and joins their threads.
  ~tcp_receiver();

  uint16_t port() const { return acceptor_->port(); }

  /// "tcp://host:port" (an IPv6 host in brackets): where senders connect.
  const std::string& endpoint() const { return acceptor_->endpoint(); }

  /// Closes every connection from the sender named `endpoint`.
  void disconnect(const std::string& endpoint) { acceptor_->disconnect(endpoint); }

 private:
  using connection = tcp_acceptor::connection;

  tcp_receiver(std::unique_ptr<tcp_acceptor> acceptor, const region_table& regions,
               fence_table& fences, const peer_key& key, std::shared_ptr<device_copier> device,
               int user_timeout_ms);

  void serve(connection& conn);

  const region_table& regions_;
  fence_table& fences_;
  const peer_key& key_;
  const std::shared_ptr<device_copier> device_;
  const int user_timeout_ms_;
  const std::unique_ptr<tcp_acceptor> acceptor_;
};

}  // namespace kvferry::transport::tcp
