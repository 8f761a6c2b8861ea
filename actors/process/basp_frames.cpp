#include "actors/process/basp_frames.hpp"

#include <algorithm>

namespace kvferry {

namespace {

constexpr uint8_t client_handshake = 0x01;
constexpr uint8_t last_operation = 0x06;  // heartbeat

uint32_t big_endian32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

}  // namespace

std::string basp_operation_name(uint8_t op) {
  static const char* names[] = {"server_handshake", "client_handshake", "direct_message",
                                "routed_message",   "monitor_message",  "down_message",
                                "heartbeat"};
  if (op <= last_operation)
    return names[op];
  return "operation " + std::to_string(op);
}

basp_frame_watch::fault basp_frame_watch::feed(const void* data, size_t n) {
  auto* p = static_cast<const unsigned char*>(data);
  while (n > 0 && fault_ == fault::none) {
    if (in_payload_) {
      auto take = static_cast<size_t>(std::min<uint64_t>(payload_left_, n));
      payload_left_ -= take;
      p += take;
      n -= take;
      if (payload_left_ == 0) {
        in_payload_ = false;
        ++frames_;
        if (operation_ == client_handshake)
          handshake_done_ = true;
      }
      continue;
    }
    auto take = std::min(basp_header_size - header_have_, n);
    std::copy_n(p, take, header_ + header_have_);
    header_have_ += take;
    p += take;
    n -= take;
    if (header_have_ < basp_header_size)
      break;
    header_have_ = 0;
    operation_ = header_[0];
    declared_ = big_endian32(header_ + 4);
    if (operation_ > last_operation) {
      fault_ = fault::unknown_operation;
      break;
    }
    if (declared_ > max_payload_) {
      fault_ = fault::oversized;
      break;
    }
    if (declared_ == 0) {
      ++frames_;
      if (operation_ == client_handshake)
        handshake_done_ = true;
    } else {
      in_payload_ = true;
      payload_left_ = declared_;
    }
  }
  return fault_;
}

std::string basp_frame_watch::describe() const {
  switch (fault_) {
    case fault::none:
      return {};
    case fault::oversized:
      return "a BASP header declared a payload of " + std::to_string(declared_) +
             " bytes (operation " + basp_operation_name(operation_) + "), expected at most " +
             std::to_string(max_payload_);
    case fault::unknown_operation:
      return "a BASP header named " + basp_operation_name(operation_) +
             ", expected an operation of 0 to 6";
  }
  return {};
}

}  // namespace kvferry
