// Which node of the cluster a process speaks for, under TLS. CAF 0.17 hides a
// connection's peer certificate, so a process proves its node at the gateway
// instead: it shows its certificate and signs, with that certificate's key, a
// statement that names its own CAF node and the gateway's. The gateway checks
// the certificate against the cluster CA and the signature, and takes the
// certificate's CN as the node's name (deploy/make-certs.sh sets CN=NODE).
// The statement binds the two processes, so a proof shown to one gateway is
// worthless at another, and for another looker. Plain OpenSSL; no CAF.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "actors/process/tls_files.hpp"

namespace kvferry {

class node_identity {
 public:
  /// A proof's outcome: the name it proves, or why it proves nothing.
  struct checked {
    bool ok = false;
    std::string name_or_error;
  };

  /// Loads a node's certificate, key and CA; `error` says what failed.
  static std::unique_ptr<node_identity> load(const tls_files& files, std::string& error);

  ~node_identity();
  node_identity(const node_identity&) = delete;
  node_identity& operator=(const node_identity&) = delete;

  /// The CN of this process's certificate.
  const std::string& name() const { return name_; }
  /// This process's certificate, PEM.
  const std::string& certificate_pem() const { return pem_; }

  /// The statement a looker at `from` signs for the gateway at `to` (the
  /// processes' CAF node ids, rendered).
  static std::string statement(std::string_view from, std::string_view to);

  /// `statement` signed with this process's key (SHA-256; DER).
  std::string sign(std::string_view statement) const;

  /// Checks a peer's certificate (PEM, at most 16 KiB) against the CA and
  /// its signature (at most 1 KiB) over `statement`: the peer's CN, or why not.
  checked verify(std::string_view certificate_pem, std::string_view signature,
                 std::string_view statement) const;

 private:
  struct openssl_parts;
  node_identity() = default;

  std::unique_ptr<openssl_parts> ssl_;
  std::string name_;
  std::string pem_;
};

}  // namespace kvferry
