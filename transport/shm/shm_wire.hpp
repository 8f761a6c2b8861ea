// The shm backend's control protocol over a Unix stream socket, shared by its
// sender and receiver. The bytes of a write never cross the socket: the sender
// copies them into the receiver's memory, mapped from memfds the receiver
// passes with SCM_RIGHTS. The socket carries admission: the receiver checks
// each batch (fence, regions, bounds) before the sender may copy, and holds the
// batch's fence and regions busy until the sender says it is done (or dies).
//
//   sender → receiver:  hello + the sender's endpoint (name_len bytes), then per batch:
//                       frame{begin} + op_header × n_ops, and once copied frame{end}
//   receiver → sender:  per begun batch, in order: grant × k (one memfd each, for
//                       regions this connection has not mapped yet; for a region in
//                       device memory a device_grant + its handle instead), then
//                       verdict + message;
//                       per end, a verdict{released}: the batch no longer holds its fence
//
// The sender may begin a few batches ahead of the one it copies; ends come in
// begin order. All fields are little-endian; structs are sent as bytes.
#pragma once

#include <cstdint>

namespace kvferry::transport::shm {

constexpr uint32_t hello_magic = 0x4853564B;         // "KVSH"
constexpr uint32_t begin_magic = 0x4253564B;         // "KVSB"
constexpr uint32_t end_magic = 0x4553564B;           // "KVSE"
constexpr uint32_t grant_magic = 0x4753564B;         // "KVSG"
constexpr uint32_t verdict_magic = 0x5653564B;       // "KVSV"
constexpr uint32_t released_magic = 0x5253564B;      // "KVSR"
constexpr uint32_t device_grant_magic = 0x4453564B;  // "KVSD"
constexpr uint32_t wire_version = 1;

/// Bounds a receiver enforces before it reads further.
constexpr uint32_t max_ops_per_batch = 1u << 22;
constexpr uint32_t max_verdict_message = 1024;
constexpr uint32_t max_name = 256;
constexpr uint32_t max_device_handle = 256;

struct hello {
  uint32_t magic = hello_magic;
  uint32_t version = wire_version;
  uint32_t name_len = 0;
  uint32_t reserved = 0;
};

/// begin (n_ops op_headers follow) or end (nothing follows) of batch `seq`.
struct frame {
  uint32_t magic = begin_magic;
  uint32_t n_ops = 0;
  uint64_t seq = 0;    ///< the sender's batch counter on this connection
  uint64_t fence = 0;  ///< begin: must be open at the receiver (0: none)
  uint64_t reserved = 0;
};

struct op_header {
  uint32_t region = 0;
  uint32_t reserved = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
};

/// Region `region` is `length` bytes at `file_offset` of the memfd passed with
/// this message.
struct grant {
  uint32_t magic = grant_magic;
  uint32_t region = 0;
  uint64_t length = 0;
  uint64_t file_offset = 0;
};

/// Region `region` is `length` bytes of device memory, shared by the handle of
/// `handle_len` bytes that follows (device_copier::export_shared).
struct device_grant {
  uint32_t magic = device_grant_magic;
  uint32_t region = 0;
  uint64_t length = 0;
  uint32_t handle_len = 0;  ///< at most max_device_handle
  uint32_t reserved = 0;
};

/// The receiver's answer to begin `seq`: ok (copy, then send end) or the error
/// (the receiver released the batch; send no end). With magic released_magic:
/// the answer to end `seq` (no message).
struct verdict {
  uint32_t magic = verdict_magic;
  uint8_t code = 0;  ///< transport::code
  uint8_t reserved[3] = {0, 0, 0};
  uint64_t seq = 0;
  uint32_t message_len = 0;  ///< bytes of message that follow, at most max_verdict_message
  uint32_t reserved2 = 0;
};

static_assert(sizeof(hello) == 16);
static_assert(sizeof(frame) == 32);
static_assert(sizeof(op_header) == 24);
static_assert(sizeof(grant) == 24);
static_assert(sizeof(device_grant) == 24);
static_assert(sizeof(verdict) == 24);

}  // namespace kvferry::transport::shm
