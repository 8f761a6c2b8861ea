#include "apps/launch/http_endpoint.hpp"

#include <httplib.h>

#include <chrono>

#include "actors/metrics/exposition.hpp"
#include "messages/failure.hpp"

namespace kvferry::launch {

caf::expected<std::unique_ptr<http_endpoint>> http_endpoint::start(
    const std::string& host, uint16_t port, std::function<std::string()> render) {
  std::unique_ptr<http_endpoint> ep{new http_endpoint};
  ep->server_ = std::make_unique<httplib::Server>();
  auto& srv = *ep->server_;
  // Scrapes are small: bound what a stranger may send and how long it may
  // keep a thread.
  srv.set_payload_max_length(4096);
  srv.set_read_timeout(5, 0);
  srv.set_write_timeout(5, 0);
  srv.set_keep_alive_max_count(100);
  srv.set_keep_alive_timeout(5);
  srv.Get("/metrics", [render](const httplib::Request&, httplib::Response& res) {
    res.set_content(render(), metrics::exposition_content_type);
  });
  srv.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("kvferry: Prometheus metrics at /metrics\n", "text/plain");
  });
  srv.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.body.empty())
      res.set_content("kvferry: " + std::to_string(res.status) + "; expected GET /metrics\n",
                      "text/plain");
  });
  int bound = port == 0 ? srv.bind_to_any_port(host) : (srv.bind_to_port(host, port) ? port : -1);
  if (bound <= 0)
    return make_error(errc::invalid_argument, "metrics endpoint: cannot listen on " + host + ":" +
                                                  std::to_string(port) +
                                                  "; expected a free port on this host");
  ep->port_ = static_cast<uint16_t>(bound);
  ep->loop_ = std::thread{[&srv] { srv.listen_after_bind(); }};
  return ep;
}

http_endpoint::~http_endpoint() {
  if (server_) {
    // stop() only stops a server that is running: one stopped right after
    // start() waits for its loop to be up first (it comes up at once).
    for (int i = 0; i < 2000 && !server_->is_running(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds{1});
    server_->stop();
  }
  if (loop_.joinable())
    loop_.join();
}

}  // namespace kvferry::launch
