#include "transport/base/peer_auth.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <stdexcept>
#include <vector>

#include "transport/base/posix_socket.hpp"

namespace kvferry::transport {

namespace {

using digest = std::array<uint8_t, 32>;

digest hmac(const uint8_t* key, size_t key_len, const std::string& data) {
  digest out{};
  unsigned len = 0;
  HMAC(EVP_sha256(), key, static_cast<int>(key_len), reinterpret_cast<const uint8_t*>(data.data()),
       data.size(), out.data(), &len);
  return out;
}

std::string hex(const digest& d) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s;
  for (auto b : d) {
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

/// The answer to `nonce` from `receiver`, made with `credential`.
digest answer(const std::string& credential, const std::array<uint8_t, 32>& nonce,
              const std::string& receiver) {
  std::string msg(reinterpret_cast<const char*>(nonce.data()), nonce.size());
  msg += receiver;
  return hmac(reinterpret_cast<const uint8_t*>(credential.data()), credential.size(), msg);
}

/// Bounds the reads of the exchange; restored to blocking reads after it.
class receive_timeout {
 public:
  receive_timeout(int fd, int ms) : fd_(fd) { set_receive_timeout(fd_, ms); }
  ~receive_timeout() { set_receive_timeout(fd_, 0); }
  receive_timeout(const receive_timeout&) = delete;
  receive_timeout& operator=(const receive_timeout&) = delete;

 private:
  int fd_;
};

}  // namespace

peer_key::peer_key(bool required) : required_(required) {
  if (RAND_bytes(key_.data(), static_cast<int>(key_.size())) != 1)
    throw std::runtime_error("peer_key: the random generator failed");
}

std::string peer_key::credential_for(const std::string& sender) const {
  return hex(hmac(key_.data(), key_.size(), sender));
}

status peer_key::verify(int fd, const std::string& sender, const std::string& self) const {
  challenge c;
  c.required = required_ ? 1 : 0;
  if (required_ && RAND_bytes(c.nonce.data(), static_cast<int>(c.nonce.size())) != 1)
    return status::io_error("the random generator failed");
  std::vector<iovec> out{{&c, sizeof(c)}};
  if (auto st = write_all(fd, out); !st.ok())
    return st;
  if (!required_)
    return {};
  receive_timeout bounded{fd, auth_timeout_ms};
  digest got{};
  if (auto st = read_exact(fd, got.data(), got.size()); !st.ok())
    return status::connect_failed("no answer to the challenge within " +
                                  std::to_string(auth_timeout_ms) + " ms: " + st.message());
  auto want = answer(credential_for(sender), c.nonce, self);
  auth_result r;
  r.accepted = CRYPTO_memcmp(got.data(), want.data(), want.size()) == 0 ? 1 : 0;
  std::vector<iovec> reply{{&r, sizeof(r)}};
  (void)write_all(fd, reply);
  if (!r.accepted)
    return status::connect_failed("'" + sender + "' answered the challenge wrongly");
  return {};
}

status answer_challenge(int fd, const std::string& credential, const std::string& receiver) {
  receive_timeout bounded{fd, auth_timeout_ms};
  challenge c;
  if (auto st = read_exact(fd, &c, sizeof(c)); !st.ok())
    return status::connect_failed(receiver + ": no challenge: " + st.message());
  if (c.magic != challenge_magic)
    return status::connect_failed(receiver + ": not a kvferry receiver of this version");
  if (!c.required)
    return {};
  if (credential.empty())
    return status::connect_failed(receiver +
                                  ": the receiver requires a credential and none was given "
                                  "(the receiving rank hands it out at handshake)");
  auto a = answer(credential, c.nonce, receiver);
  std::vector<iovec> out{{a.data(), a.size()}};
  if (auto st = write_all(fd, out); !st.ok())
    return st;
  auth_result r;
  if (auto st = read_exact(fd, &r, sizeof(r)); !st.ok() || r.magic != auth_result_magic)
    return status::connect_failed(receiver + ": the receiver refused the credential");
  if (!r.accepted)
    return status::connect_failed(receiver + ": the receiver refused the credential");
  return {};
}

}  // namespace kvferry::transport
