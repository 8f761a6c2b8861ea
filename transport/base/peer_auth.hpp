// Who may open a data connection: the receiving side of every wire backend
// (tcp, shm, verbs) holds a random key, drawn when it starts. A sender proves
// that it was given the credential for its own endpoint name,
// HMAC-SHA256(key, name), which only the receiver can compute and which the
// receiving rank hands out over the control plane (dest_registration). The
// proof is a challenge and response on the connection, right after the hello:
//
//   receiver → sender:  challenge{nonce}            (32 fresh random bytes)
//   sender → receiver:  HMAC-SHA256(credential, nonce || receiver's name)
//   receiver → sender:  auth_result{accepted or refused}; refused: it closes
//
// The credential never crosses the data connection, a recorded answer is
// worthless for another nonce, and an answer made for another receiver does
// not verify. A stranger learns "refused" and nothing of the regions.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "transport/status.hpp"

namespace kvferry::transport {

constexpr uint32_t challenge_magic = 0x4341564B;    // "KVAC"
constexpr uint32_t auth_result_magic = 0x5241564B;  // "KVAR"

/// Longest wait for the other side's part of the exchange.
constexpr int auth_timeout_ms = 5000;

struct challenge {
  uint32_t magic = challenge_magic;
  uint32_t required = 1;  ///< 0: the receiver trusts every peer (tests only); no answer follows
  std::array<uint8_t, 32> nonce{};
};

struct auth_result {
  uint32_t magic = auth_result_magic;
  uint32_t accepted = 0;
};

static_assert(sizeof(challenge) == 40);
static_assert(sizeof(auth_result) == 8);

/// The receiving side's key, and what follows from it.
class peer_key {
 public:
  /// A fresh random key; `required` false makes a receiver that admits any
  /// peer (options::trust_every_peer: tests of transport mechanics only).
  explicit peer_key(bool required = true);

  bool required() const { return required_; }

  /// The credential of the sender whose endpoint is `sender` (hex, 64 chars).
  std::string credential_for(const std::string& sender) const;

  /// Challenges the sender on `fd` that named itself `sender` in its hello
  /// and checks its answer; `self` is the receiver's own endpoint. OK when it
  /// proved its credential (or none is required); an error saying why
  /// otherwise, for the receiver's log only (the sender hears "refused").
  status verify(int fd, const std::string& sender, const std::string& self) const;

 private:
  bool required_;
  std::array<uint8_t, 32> key_{};
};

/// The sending side: reads the receiver's challenge on `fd` and answers it
/// with `credential` (from the receiving rank); `receiver` is the endpoint
/// connected to. connect_failed naming the receiver when it refuses, or
/// wants a credential and none was given.
status answer_challenge(int fd, const std::string& credential, const std::string& receiver);

}  // namespace kvferry::transport
