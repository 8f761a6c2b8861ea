#include "actors/gateway/node_identity.hpp"

#include <fstream>
#include <sstream>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

namespace kvferry {

namespace {

constexpr size_t max_certificate = 16 * 1024;
constexpr size_t max_signature = 1024;

std::string openssl_error() {
  std::string out;
  while (auto e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    out += (out.empty() ? "" : "; ") + std::string{buf};
  }
  return out.empty() ? "unknown OpenSSL error" : out;
}

template <class T, void (*Free)(T*)>
struct freer {
  void operator()(T* p) const { Free(p); }
};
using x509_ptr = std::unique_ptr<X509, freer<X509, X509_free>>;
using pkey_ptr = std::unique_ptr<EVP_PKEY, freer<EVP_PKEY, EVP_PKEY_free>>;
using store_ptr = std::unique_ptr<X509_STORE, freer<X509_STORE, X509_STORE_free>>;
using store_ctx_ptr = std::unique_ptr<X509_STORE_CTX, freer<X509_STORE_CTX, X509_STORE_CTX_free>>;
using md_ctx_ptr = std::unique_ptr<EVP_MD_CTX, freer<EVP_MD_CTX, EVP_MD_CTX_free>>;
using bio_ptr = std::unique_ptr<BIO, freer<BIO, BIO_free_all>>;

x509_ptr parse_certificate(std::string_view pem) {
  bio_ptr bio{BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()))};
  if (!bio)
    return nullptr;
  return x509_ptr{PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)};
}

std::string common_name(X509* cert) {
  char cn[256] = {0};
  auto n = X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof(cn));
  return n > 0 ? std::string{cn, static_cast<size_t>(n)} : std::string{};
}

std::string slurp(const std::string& path) {
  std::ifstream in{path};
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

struct node_identity::openssl_parts {
  pkey_ptr key;
  store_ptr cas;
};

node_identity::~node_identity() = default;

std::unique_ptr<node_identity> node_identity::load(const tls_files& files, std::string& error) {
  std::unique_ptr<node_identity> out{new node_identity};
  out->ssl_ = std::make_unique<openssl_parts>();
  out->pem_ = slurp(files.certificate);
  auto cert = parse_certificate(out->pem_);
  if (!cert) {
    error =
        "the certificate " + files.certificate + " is not a PEM certificate: " + openssl_error();
    return nullptr;
  }
  out->name_ = common_name(cert.get());
  if (out->name_.empty()) {
    error = "the certificate " + files.certificate + " has no CN; expected CN=NODE";
    return nullptr;
  }
  auto key_pem = slurp(files.key);
  bio_ptr bio{BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size()))};
  out->ssl_->key.reset(PEM_read_bio_PrivateKey(
      bio.get(), nullptr, nullptr,
      files.passphrase.empty() ? nullptr : const_cast<char*>(files.passphrase.c_str())));
  if (!out->ssl_->key) {
    error = "the key " + files.key + " cannot be read: " + openssl_error();
    return nullptr;
  }
  if (X509_check_private_key(cert.get(), out->ssl_->key.get()) != 1) {
    error = "the key " + files.key + " is not the key of " + files.certificate;
    ERR_clear_error();
    return nullptr;
  }
  out->ssl_->cas.reset(X509_STORE_new());
  if (!out->ssl_->cas ||
      X509_STORE_load_locations(out->ssl_->cas.get(), files.cafile.c_str(), nullptr) != 1) {
    error = "the CA file " + files.cafile + " cannot be loaded: " + openssl_error();
    return nullptr;
  }
  return out;
}

std::string node_identity::statement(std::string_view from, std::string_view to) {
  std::string s = "kvferry gateway lookup v1\nfrom ";
  s += from;
  s += "\nto ";
  s += to;
  s += "\n";
  return s;
}

std::string node_identity::sign(std::string_view statement) const {
  md_ctx_ptr md{EVP_MD_CTX_new()};
  size_t len = 0;
  if (!md || EVP_DigestSignInit(md.get(), nullptr, EVP_sha256(), nullptr, ssl_->key.get()) != 1 ||
      EVP_DigestSign(md.get(), nullptr, &len,
                     reinterpret_cast<const unsigned char*>(statement.data()),
                     statement.size()) != 1) {
    ERR_clear_error();
    return {};
  }
  std::string sig(len, '\0');
  if (EVP_DigestSign(md.get(), reinterpret_cast<unsigned char*>(sig.data()), &len,
                     reinterpret_cast<const unsigned char*>(statement.data()),
                     statement.size()) != 1) {
    ERR_clear_error();
    return {};
  }
  sig.resize(len);
  return sig;
}

node_identity::checked node_identity::verify(std::string_view certificate_pem,
                                             std::string_view signature,
                                             std::string_view statement) const {
  if (certificate_pem.empty() || certificate_pem.size() > max_certificate)
    return {false, "a certificate of " + std::to_string(certificate_pem.size()) +
                       " bytes; expected a PEM certificate of 1 to " +
                       std::to_string(max_certificate) + " bytes"};
  if (signature.empty() || signature.size() > max_signature)
    return {false, "a signature of " + std::to_string(signature.size()) + " bytes; expected 1 to " +
                       std::to_string(max_signature) + " bytes"};
  auto cert = parse_certificate(certificate_pem);
  if (!cert) {
    ERR_clear_error();
    return {false, "the certificate shown is not a PEM certificate"};
  }
  store_ctx_ptr ctx{X509_STORE_CTX_new()};
  if (!ctx || X509_STORE_CTX_init(ctx.get(), ssl_->cas.get(), cert.get(), nullptr) != 1) {
    ERR_clear_error();
    return {false, "cannot check the certificate shown: " + openssl_error()};
  }
  if (X509_verify_cert(ctx.get()) != 1) {
    auto why = X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx.get()));
    ERR_clear_error();
    return {false, std::string{"the certificate shown was not signed by the cluster CA: "} + why};
  }
  auto name = common_name(cert.get());
  if (name.empty())
    return {false, "the certificate shown has no CN; expected CN=NODE"};
  md_ctx_ptr md{EVP_MD_CTX_new()};
  auto* key = X509_get0_pubkey(cert.get());
  if (!md || !key || EVP_DigestVerifyInit(md.get(), nullptr, EVP_sha256(), nullptr, key) != 1 ||
      EVP_DigestVerify(md.get(), reinterpret_cast<const unsigned char*>(signature.data()),
                       signature.size(), reinterpret_cast<const unsigned char*>(statement.data()),
                       statement.size()) != 1) {
    ERR_clear_error();
    return {false, "the signature of " + name + " does not verify for this connection"};
  }
  return {true, name};
}

}  // namespace kvferry
