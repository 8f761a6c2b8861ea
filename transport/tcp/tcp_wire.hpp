// The tcp backend's wire format, shared by its sender and receiver. All fields
// are little-endian (the hosts kvferry runs on); structs are sent as bytes.
//
//   sender → receiver:  hello, the sender's own endpoint (name_len bytes), then per batch:
//                       batch_header, op_header × n_ops, payload (ops' bytes in order)
//   receiver → sender:  per batch, in order: ack_header, message bytes
#pragma once

#include <cstdint>

#include "transport/base/op_header.hpp"

namespace kvferry::transport::tcp {

constexpr uint32_t hello_magic = 0x5446564B;  // "KVFT"
constexpr uint32_t batch_magic = 0x4246564B;  // "KVFB"
constexpr uint32_t ack_magic = 0x4146564B;    // "KVFA"
constexpr uint32_t wire_version = 2;

/// Bounds a receiver enforces before it reads further (a peer cannot make it
/// allocate more than this for headers or messages).
constexpr uint32_t max_ops_per_batch = 1u << 22;
constexpr uint32_t max_ack_message = 1024;
constexpr uint32_t max_name = 256;

/// Opens a connection; `name_len` bytes of the sender's endpoint follow, so
/// the receiver knows whose writes a connection carries.
struct hello {
  uint32_t magic = hello_magic;
  uint32_t version = wire_version;
  uint32_t name_len = 0;
  uint32_t reserved = 0;
};

struct batch_header {
  uint32_t magic = batch_magic;
  uint32_t n_ops = 0;
  uint64_t cookie = 0;
  uint64_t payload_bytes = 0;  ///< must equal the sum of the ops' lengths
  uint64_t fence = 0;          ///< must be open at the receiver (0: none)
};

/// One op of a batch (transport/base/op_header.hpp, shared with shm and verbs).
using op_header = kvferry::transport::op_header;

struct ack_header {
  uint32_t magic = ack_magic;
  uint8_t code = 0;  ///< transport::code
  uint8_t reserved[3] = {0, 0, 0};
  uint64_t cookie = 0;
  uint32_t message_len = 0;  ///< bytes of message that follow, at most max_ack_message
  uint32_t reserved2 = 0;
};

static_assert(sizeof(hello) == 16);
static_assert(sizeof(batch_header) == 32);
static_assert(sizeof(ack_header) == 24);

}  // namespace kvferry::transport::tcp
