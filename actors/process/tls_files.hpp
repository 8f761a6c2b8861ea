// A node's TLS files (actors/gateway/tls.hpp uses them; the cluster file names them).
#pragma once

#include <string>

namespace kvferry {

/// A node's certificate and key, and the cluster CA that signed every node's
/// certificate.
struct tls_files {
  std::string certificate;
  std::string key;
  std::string cafile;
  std::string passphrase;  ///< of the key; empty for an unencrypted key
};

}  // namespace kvferry
