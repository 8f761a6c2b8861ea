// A small HTTP server (cpp-httplib) for one node's /metrics: GET /metrics
// answers what `render` returns, in Prometheus' text format; GET / names the
// path; anything else is 404 (or 400 for what is not HTTP). A stranger's
// bytes cost a short read: requests are small and bounded, a
// silent client is dropped after a few seconds, and a bad request line is
// answered 400 by the library. Runs on its own threads, never an actor's.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <caf/expected.hpp>

namespace httplib {
class Server;
}

namespace kvferry::launch {

class http_endpoint {
 public:
  /// Listens on host:port (0: any free port) and serves `render`'s text at
  /// /metrics. The error names the address and why it could not listen.
  static caf::expected<std::unique_ptr<http_endpoint>> start(const std::string& host, uint16_t port,
                                                             std::function<std::string()> render);

  /// Stops listening and waits for its threads.
  ~http_endpoint();
  http_endpoint(const http_endpoint&) = delete;
  http_endpoint& operator=(const http_endpoint&) = delete;

  uint16_t port() const { return port_; }

 private:
  http_endpoint() = default;

  std::unique_ptr<httplib::Server> server_;
  std::thread loop_;
  uint16_t port_ = 0;
};

}  // namespace kvferry::launch
