// Admission: the protocol shm and verbs share on their control connection.
// Their bytes never cross that connection (shm copies into mapped memory,
// verbs writes by RDMA), so the receiver cannot see a write land: it checks
// each batch (fence, regions, bounds) before the sender may write, and holds
// the batch's fence and regions busy until the sender says it is done (or
// its connection dies).
//
//   sender → receiver:  per batch: frame{begin} + op_header × n_ops, and once
//                       written frame{end}
//   receiver → sender:  per begun batch, in order: reply{code} + message
//                       (+ what the backend adds: shm's grants before it,
//                       verbs' op_grant per op after it); per end,
//                       reply{released}: the batch no longer holds its fence
//
// Each backend has its own magic numbers ("KV", its letter, the message's
// letter) and its own hello; the rest is this file's. All fields are
// little-endian; structs are sent as bytes, their layout checked below.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "transport/base/op_header.hpp"
#include "transport/status.hpp"

namespace kvferry::transport::admission {

/// "KV", then `backend` and `message`, read as a little-endian word:
/// magic('S', 'B') is "KVSB".
constexpr uint32_t magic(char backend, char message) {
  return uint32_t{'K'} | uint32_t{'V'} << 8 | uint32_t(uint8_t(backend)) << 16 |
         uint32_t(uint8_t(message)) << 24;
}

/// The magic numbers of one backend's admission messages.
struct magics {
  uint32_t begin;     ///< frame: a batch's ops follow
  uint32_t end;       ///< frame: the batch is written
  uint32_t reply;     ///< reply: the answer to a begin
  uint32_t released;  ///< reply: the answer to an end

  /// The magics of backend letter `backend` ('S' for shm, 'I' for verbs).
  static constexpr magics of(char backend) {
    return {magic(backend, 'B'), magic(backend, 'E'), magic(backend, 'V'), magic(backend, 'R')};
  }
};

/// Bounds a receiver enforces before it reads further.
constexpr uint32_t max_ops_per_batch = 1u << 22;
constexpr uint32_t max_reply_message = 1024;

/// begin (n_ops op_headers follow) or end (nothing follows) of batch `seq`.
/// `magic` has no default: the sender names its backend's begin or end.
struct frame {
  uint32_t magic = 0;
  uint32_t n_ops = 0;
  uint64_t seq = 0;    ///< the sender's batch counter on this connection
  uint64_t fence = 0;  ///< begin: must be open at the receiver (0: none)
  uint64_t reserved = 0;
};

/// The receiver's answer to begin `seq`: ok (write, then send end) or the
/// error (the receiver released the batch; send no end), then message_len
/// bytes of message. With the released magic: the answer to end `seq` (no
/// message). `magic` has no default: the receiver names its backend's.
struct reply {
  uint32_t magic = 0;
  uint8_t code = 0;  ///< transport::code
  uint8_t reserved[3] = {0, 0, 0};
  uint64_t seq = 0;
  uint32_t message_len = 0;  ///< bytes of message that follow, at most max_reply_message
  uint32_t n_regions = 0;    ///< verbs: op_grant records (one per op) after the message; shm: 0
};

static_assert(sizeof(frame) == 32);
static_assert(offsetof(frame, magic) == 0 && offsetof(frame, n_ops) == 4 &&
              offsetof(frame, seq) == 8 && offsetof(frame, fence) == 16 &&
              offsetof(frame, reserved) == 24);
static_assert(sizeof(reply) == 24);
static_assert(offsetof(reply, magic) == 0 && offsetof(reply, code) == 4 &&
              offsetof(reply, seq) == 8 && offsetof(reply, message_len) == 16 &&
              offsetof(reply, n_regions) == 20);

/// What the code byte of a reply to a begin means to the sender: ok, or the
/// batch's refusal with the receiver's `message`. A refused batch is the
/// batch's failure, never the link's (the receiver checked it and the
/// connection carries on), so a link error code from the peer reads as
/// invalid_argument. Nothing if the byte is no transport code: the peer
/// speaks something else.
inline std::optional<status> reply_status(uint8_t code_byte, const std::string& message) {
  if (code_byte == static_cast<uint8_t>(code::ok))
    return status{};
  if (code_byte > static_cast<uint8_t>(code::not_granted))
    return std::nullopt;
  auto c = static_cast<code>(code_byte);
  return status::from(is_link_error(c) ? code::invalid_argument : c, message);
}

}  // namespace kvferry::transport::admission
