// The verbs backend's side channel: a TCP connection per (sender, receiver)
// that bootstraps the RC queue pair and admits batches, the protocol verbs
// shares with shm (transport/base/admission_wire.hpp). The bytes of a write
// never cross it; they go by RDMA WRITE. The receiver cannot see one-sided
// writes, so it checks each batch (fence, regions, bounds) before the sender
// may write, and holds the batch's fence and regions busy until the sender
// says the writes completed (or its connection dies and its queue pair is
// moved to the error state).
//
//   sender → receiver:  hello + qp_info + the sender's endpoint (name_len bytes),
//                       then per batch: frame{begin} + op_header × n_ops, and
//                       once its writes completed frame{end}
//   receiver → sender:  hello + qp_info, then per begun batch, in order: reply
//                       + message + region_info × n_regions (regions this
//                       connection has not been told of yet); per end,
//                       reply{released}: the batch no longer holds its fence
//
// All fields are little-endian; structs are sent as bytes.
#pragma once

#include <cstdint>

#include "transport/base/admission_wire.hpp"
#include "transport/base/op_header.hpp"
#include "transport/verbs/verbs_qp.hpp"

namespace kvferry::transport::verbs {

constexpr admission::magics admission_magics = admission::magics::of('I');
constexpr uint32_t hello_magic = 0x4849564B;                    // "KVIH"
constexpr uint32_t begin_magic = admission_magics.begin;        // "KVIB"
constexpr uint32_t end_magic = admission_magics.end;            // "KVIE"
constexpr uint32_t reply_magic = admission_magics.reply;        // "KVIV"
constexpr uint32_t released_magic = admission_magics.released;  // "KVIR"
constexpr uint32_t wire_version = 1;
static_assert(begin_magic == 0x4249564B && end_magic == 0x4549564B && reply_magic == 0x5649564B &&
              released_magic == 0x5249564B);

using admission::max_ops_per_batch;
using admission::max_reply_message;
constexpr uint32_t max_regions_per_reply = 1u << 16;
constexpr uint32_t max_name = 256;

struct hello {
  uint32_t magic = hello_magic;
  uint32_t version = wire_version;
  uint32_t name_len = 0;  ///< sender → receiver only
  uint32_t reserved = 0;
  qp_info qp;
};

/// The admission messages and their op_header (transport/base/); a reply
/// counts the region_info records that follow its message in n_regions.
using admission::frame;
using admission::reply;

/// A receiver region the sender may write: `length` bytes at `addr`, `rkey`.
struct region_info {
  uint32_t region = 0;
  uint32_t rkey = 0;
  uint64_t addr = 0;
  uint64_t length = 0;
};

static_assert(sizeof(hello) == 48);
static_assert(sizeof(region_info) == 24);

}  // namespace kvferry::transport::verbs
