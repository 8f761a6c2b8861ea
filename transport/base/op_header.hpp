// One write as a wire backend's sender announces it: the receiver's region,
// the offset in it and the length. tcp sends op_header × n after its batch
// header (transport/tcp/tcp_wire.hpp); shm and verbs after an admission frame
// (transport/base/admission_wire.hpp). Little-endian, sent as bytes: the
// layout below is the wire's, checked field by field.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvferry::transport {

/// Writes `length` bytes at `offset` of the receiver's region `region`.
struct op_header {
  uint32_t region = 0;
  uint32_t reserved = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
};

static_assert(sizeof(op_header) == 24);
static_assert(offsetof(op_header, region) == 0 && offsetof(op_header, reserved) == 4 &&
              offsetof(op_header, offset) == 8 && offsetof(op_header, length) == 16);

}  // namespace kvferry::transport
