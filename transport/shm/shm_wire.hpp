// The shm backend's control protocol over a Unix stream socket, shared by its
// sender and receiver. The bytes of a write never cross the socket: the sender
// copies them into the receiver's memory, mapped from memfds the receiver
// passes with SCM_RIGHTS. The socket carries admission, the protocol shm
// shares with verbs (transport/base/admission_wire.hpp): the receiver checks
// each batch (fence, regions, bounds) before the sender may copy, and holds the
// batch's fence and regions busy until the sender says it is done (or dies).
//
//   sender → receiver:  hello + the sender's endpoint (name_len bytes), then per batch:
//                       frame{begin} + op_header × n_ops, and once copied frame{end}
//   receiver → sender:  per begun batch, in order: grant × k (one memfd each, for
//                       regions this connection has not mapped yet; for a region in
//                       device memory a device_grant + its handle instead), then
//                       reply + message;
//                       per end, a reply{released}: the batch no longer holds its fence
//
// The sender may begin a few batches ahead of the one it copies; ends come in
// begin order. All fields are little-endian; structs are sent as bytes.
#pragma once

#include <cstdint>

#include "transport/base/admission_wire.hpp"
#include "transport/base/op_header.hpp"

namespace kvferry::transport::shm {

constexpr admission::magics admission_magics = admission::magics::of('S');
constexpr uint32_t hello_magic = 0x4853564B;                    // "KVSH"
constexpr uint32_t begin_magic = admission_magics.begin;        // "KVSB"
constexpr uint32_t end_magic = admission_magics.end;            // "KVSE"
constexpr uint32_t grant_magic = 0x4753564B;                    // "KVSG"
constexpr uint32_t reply_magic = admission_magics.reply;        // "KVSV"
constexpr uint32_t released_magic = admission_magics.released;  // "KVSR"
constexpr uint32_t device_grant_magic = 0x4453564B;             // "KVSD"
constexpr uint32_t wire_version = 1;
static_assert(begin_magic == 0x4253564B && end_magic == 0x4553564B && reply_magic == 0x5653564B &&
              released_magic == 0x5253564B);

/// Bounds a receiver enforces before it reads further.
using admission::max_ops_per_batch;
using admission::max_reply_message;
constexpr uint32_t max_name = 256;
constexpr uint32_t max_device_handle = 256;

struct hello {
  uint32_t magic = hello_magic;
  uint32_t version = wire_version;
  uint32_t name_len = 0;
  uint32_t reserved = 0;
};

/// The admission messages and their op_header (transport/base/); shm's
/// replies carry no regions (n_regions 0).
using admission::frame;
using admission::reply;

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

static_assert(sizeof(hello) == 16);
static_assert(sizeof(grant) == 24);
static_assert(sizeof(device_grant) == 24);

}  // namespace kvferry::transport::shm
