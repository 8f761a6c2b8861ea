#include "actors/gateway/tls.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>

#include <caf/openssl/manager.hpp>

#include "actors/base/log.hpp"

namespace kvferry {

namespace detail {
bool openssl_error_queue_guarded();  // openssl_error_queue.cpp
}  // namespace detail

std::string check_tls_files(const tls_files& f) {
  for (auto [what, path] :
       {std::pair<const char*, const std::string*>{"certificate", &f.certificate},
        {"key", &f.key},
        {"CA file", &f.cafile}}) {
    if (path->empty())
      return std::string{"no "} + what + " given; expected a PEM file";
    std::ifstream in{*path};
    if (!in)
      return std::string{"the "} + what + " " + *path + " cannot be read: " + std::strerror(errno);
  }
  return {};
}

void enable_tls(caf::actor_system_config& cfg, const tls_files& f) {
  cfg.openssl_certificate = f.certificate;
  cfg.openssl_key = f.key;
  cfg.openssl_cafile = f.cafile;
  cfg.openssl_passphrase = f.passphrase;
  cfg.load<caf::openssl::manager>();
  // Also links openssl_error_queue.cpp into every program that uses TLS.
  if (!detail::openssl_error_queue_guarded())
    log().warn(
        "TLS: libcaf_openssl does not call kvferry's SSL_read; one failed handshake may "
        "then cut this process's other TLS connections (actors/process/openssl_error_queue.cpp)");
}

bool loopback_host(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

}  // namespace kvferry
