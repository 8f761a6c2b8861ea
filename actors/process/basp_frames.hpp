// The frames of CAF's wire (BASP, CAF 0.17) as they come in on a connection
// that a CAF port accepted, read byte by byte before CAF reads them: plain
// logic, no CAF. Each frame is a 32-byte header (operation, two pad bytes,
// flags, payload length, operation data, source and destination actor, all
// big-endian) and the payload it declares. CAF allocates a declared payload
// as it is (up to 4 GiB) and waits for it for good; this watch says, from the
// header alone, when a declaration is larger than any message kvferry sends,
// and when the connection's BASP handshake is complete (a whole
// client_handshake frame came in).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace kvferry {

/// The largest payload a BASP frame may declare by default: 16 MiB. The
/// largest message kvferry sends is a topology of 4,096 ranks (about 1 MiB:
/// 4,096 rank entries of a name, a handle, ports and a credential); a
/// frame above the cap is no kvferry message.
constexpr uint32_t default_max_basp_payload = 16u << 20;

/// The size of a BASP header on the wire.
constexpr size_t basp_header_size = 32;

/// A connection's incoming BASP frames.
class basp_frame_watch {
 public:
  enum class fault {
    none,
    oversized,          ///< a header declared more than the cap
    unknown_operation,  ///< a header named no BASP operation
  };

  explicit basp_frame_watch(uint32_t max_payload = default_max_basp_payload)
      : max_payload_(max_payload) {}

  /// Takes `n` more bytes of the stream; returns the first fault found (it
  /// stays: nothing after a fault is read).
  fault feed(const void* data, size_t n);

  fault found() const { return fault_; }

  /// True once a whole client_handshake frame (header and payload) came in:
  /// the peer spoke BASP as a node that connects does.
  bool handshake_done() const { return handshake_done_; }

  /// Frames seen whole so far.
  uint64_t frames() const { return frames_; }

  /// What the fault was, in words naming the values ("a BASP header declared
  /// a payload of 4294967295 bytes (operation direct_message), expected at
  /// most 16777216"); empty without one.
  std::string describe() const;

 private:
  uint32_t max_payload_;
  fault fault_ = fault::none;
  bool handshake_done_ = false;
  uint64_t frames_ = 0;
  unsigned char header_[basp_header_size] = {};
  size_t header_have_ = 0;
  uint64_t payload_left_ = 0;
  bool in_payload_ = false;
  uint8_t operation_ = 0;  ///< of the frame being read
  uint32_t declared_ = 0;  ///< its payload length
};

/// The name of BASP operation `op` ("client_handshake"), or "operation N".
std::string basp_operation_name(uint8_t op);

}  // namespace kvferry
