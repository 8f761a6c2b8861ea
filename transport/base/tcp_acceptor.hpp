// The listening half that the tcp and verbs receivers share: a TCP listener,
// the port it is bound to and the endpoint senders dial, the acceptor thread,
// and the connections it accepted, each served on a thread of its own
// (connection_threads). A receiver keeps only what it does with a connection:
// its serve().
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "transport/base/connection_threads.hpp"
#include "transport/base/posix_socket.hpp"

namespace kvferry::transport {

class tcp_acceptor {
 public:
  using connection = connection_threads::connection;

  /// Listens on host:port (port 0: any), with socket buffers of
  /// `buffer_bytes` (0: the system's); `scheme` names the endpoint
  /// ("tcp://host:port"). Accepts nothing before serve().
  static result<std::unique_ptr<tcp_acceptor>> listen(const std::string& scheme,
                                                      const std::string& host, uint16_t port,
                                                      int buffer_bytes = 0) {
    auto listening = listen_on(host, port, buffer_bytes);
    if (!listening.ok())
      return listening.error();
    auto [fd, bound] = std::move(listening).value();
    return std::unique_ptr<tcp_acceptor>{
        new tcp_acceptor(std::move(fd), format_endpoint(scheme, host, bound), bound)};
  }

  tcp_acceptor(const tcp_acceptor&) = delete;
  tcp_acceptor& operator=(const tcp_acceptor&) = delete;
  ~tcp_acceptor() { stop(); }

  /// Starts accepting: each connection is tuned and served by `serve` on a
  /// thread of its own. Called once.
  void serve(std::function<void(connection&)> serve) {
    thread_ = std::thread{
        [this, serve = std::move(serve)] { conns_.accept_tcp(listener_.get(), stopping_, serve); }};
  }

  /// Closes the listener and every connection, and joins their threads; a
  /// receiver calls it before what its serve() uses goes. Idempotent.
  void stop() {
    stopping_ = true;
    listener_.shutdown();
    if (thread_.joinable())
      thread_.join();
    conns_.stop();
  }

  /// Closes every connection from the sender named `endpoint`.
  void disconnect(const std::string& endpoint) {
    conns_.disconnect(endpoint, [](connection& c) { c.fd.shutdown(); });
  }

  /// The connections, for greet() and refused().
  connection_threads& connections() { return conns_; }

  uint16_t port() const { return port_; }
  const std::string& endpoint() const { return endpoint_; }

 private:
  tcp_acceptor(socket_fd listener, std::string endpoint, uint16_t port)
      : listener_(std::move(listener)), port_(port), endpoint_(std::move(endpoint)) {}

  socket_fd listener_;
  uint16_t port_;
  std::string endpoint_;
  std::atomic<bool> stopping_{false};
  connection_threads conns_;
  std::thread thread_;
};

}  // namespace kvferry::transport
