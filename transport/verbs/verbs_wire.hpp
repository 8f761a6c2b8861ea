// The verbs backend's side channel: a TCP connection per (sender, receiver)
// that bootstraps the RC queue pair and admits batches. The bytes of a write
// never cross it; they go by RDMA WRITE. The receiver cannot see one-sided
// writes, so it checks each batch (fence, regions, bounds) before the sender
// may write, and holds the batch's fence and regions busy until the sender
// says the writes completed (or its connection dies and its queue pair is
// moved to the error state).
//
//   sender → receiver:  hello + qp_info + the sender's endpoint (name_len bytes),
//                       then per batch: frame{begin} + op_header × n_ops, and
//                       once its writes completed frame{end}
//   receiver → sender:  hello + qp_info, then per begun batch, in order: verdict
//                       + message + region_info × n_regions (regions this
//                       connection has not been told of yet); per end,
//                       verdict{released}: the batch no longer holds its fence
//
// All fields are little-endian; structs are sent as bytes.
#pragma once

#include <cstdint>

#include "transport/verbs/verbs_qp.hpp"

namespace kvferry::transport::verbs {

constexpr uint32_t hello_magic = 0x4849564B;     // "KVIH"
constexpr uint32_t begin_magic = 0x4249564B;     // "KVIB"
constexpr uint32_t end_magic = 0x4549564B;       // "KVIE"
constexpr uint32_t verdict_magic = 0x5649564B;   // "KVIV"
constexpr uint32_t released_magic = 0x5249564B;  // "KVIR"
constexpr uint32_t wire_version = 1;

constexpr uint32_t max_ops_per_batch = 1u << 22;
constexpr uint32_t max_verdict_message = 1024;
constexpr uint32_t max_regions_per_verdict = 1u << 16;
constexpr uint32_t max_name = 256;

struct hello {
  uint32_t magic = hello_magic;
  uint32_t version = wire_version;
  uint32_t name_len = 0;  ///< sender → receiver only
  uint32_t reserved = 0;
  qp_info qp;
};

/// begin (n_ops op_headers follow) or end (nothing follows) of batch `seq`.
struct frame {
  uint32_t magic = begin_magic;
  uint32_t n_ops = 0;
  uint64_t seq = 0;
  uint64_t fence = 0;  ///< begin: must be open at the receiver (0: none)
  uint64_t reserved = 0;
};

struct op_header {
  uint32_t region = 0;
  uint32_t reserved = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
};

/// A receiver region the sender may write: `length` bytes at `addr`, `rkey`.
struct region_info {
  uint32_t region = 0;
  uint32_t rkey = 0;
  uint64_t addr = 0;
  uint64_t length = 0;
};

/// The answer to begin `seq` (ok: write, then send end; an error: released,
/// send no end), or with released_magic the answer to end `seq`.
struct verdict {
  uint32_t magic = verdict_magic;
  uint8_t code = 0;  ///< transport::code
  uint8_t reserved[3] = {0, 0, 0};
  uint64_t seq = 0;
  uint32_t message_len = 0;
  uint32_t n_regions = 0;
};

static_assert(sizeof(hello) == 48);
static_assert(sizeof(frame) == 32);
static_assert(sizeof(op_header) == 24);
static_assert(sizeof(region_info) == 24);
static_assert(sizeof(verdict) == 24);

}  // namespace kvferry::transport::verbs
