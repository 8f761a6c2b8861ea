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
//                       + message + op_grant × n_regions (admitted: one per
//                       op of the batch, in op order; refused: none); per
//                       end, reply{released}: the batch no longer holds its
//                       fence
//
// All fields are little-endian; structs are sent as bytes.
#pragma once

#include <cstddef>
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
// 2: a reply carries op_grant per op (1 carried region_info per new region).
constexpr uint32_t wire_version = 2;
static_assert(begin_magic == 0x4249564B && end_magic == 0x4549564B && reply_magic == 0x5649564B &&
              released_magic == 0x5249564B);

using admission::max_ops_per_batch;
using admission::max_reply_message;
constexpr uint32_t max_name = 256;

struct hello {
  uint32_t magic = hello_magic;
  uint32_t version = wire_version;
  uint32_t name_len = 0;  ///< sender → receiver only
  uint32_t reserved = 0;
  qp_info qp;
};

/// The admission messages and their op_header (transport/base/); a reply
/// counts the op_grant records that follow its message in n_regions.
using admission::frame;
using admission::reply;

/// Where op k of an admitted batch writes: RDMA WRITE to `addr` with `rkey`
/// (a memory window's, or with windows off the region's). The op's length is
/// the sender's own; the receiver granted exactly that many bytes at `addr`.
/// A zero-length op has rkey 0.
struct op_grant {
  uint64_t addr = 0;
  uint32_t rkey = 0;
  uint32_t reserved = 0;
};

static_assert(sizeof(hello) == 48);
static_assert(sizeof(op_grant) == 16);
static_assert(offsetof(op_grant, addr) == 0 && offsetof(op_grant, rkey) == 8 &&
              offsetof(op_grant, reserved) == 12);

}  // namespace kvferry::transport::verbs
