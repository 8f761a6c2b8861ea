// The data plane's own result type: a code and a message that names the
// values. No CAF, no exceptions; a status that is dropped is a compile warning.
// The transfer actor turns a status into a room failure (actors/transfer/to_failure).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace kvferry::transport {

/// What went wrong, grouped by what it takes down: one batch (invalid_argument
/// .. out_of_bounds), one peer connection (unknown_peer .. protocol_error), or
/// the transport (io_error, shut_down).
enum class code : uint8_t {
  ok = 0,
  in_progress = 1,       ///< not an error: the operation continues
  invalid_argument = 2,  ///< a malformed request (zero length, overflow, bad endpoint)
  unknown_region = 3,    ///< a region id that is not (or no longer) registered
  out_of_bounds = 4,     ///< offset + length outside the region
  unknown_peer = 5,      ///< a peer id this transport never connected
  connect_failed = 6,    ///< the peer's endpoint refused or did not answer
  connection_lost = 7,   ///< the connection dropped with the batch in flight
  protocol_error = 8,    ///< the peer spoke something else
  io_error = 9,          ///< a local system call failed
  shut_down = 10,        ///< the transport is closing
  fenced = 11,           ///< the receiver closed the batch's fence: its memory was released
  not_granted = 12,      ///< an op outside what the receiver granted this sender for the fence
};

/// "out_of_bounds", ...
std::string_view to_string(code c);

/// True for codes that take down the whole connection to a peer.
constexpr bool is_link_error(code c) {
  return c == code::connect_failed || c == code::connection_lost || c == code::protocol_error;
}

/// OK or an error with a message. Cheap when OK (no allocation).
class [[nodiscard]] status {
 public:
  status() = default;

  static status invalid_argument(std::string msg) {
    return {code::invalid_argument, std::move(msg)};
  }
  static status unknown_region(std::string msg) { return {code::unknown_region, std::move(msg)}; }
  static status out_of_bounds(std::string msg) { return {code::out_of_bounds, std::move(msg)}; }
  static status unknown_peer(std::string msg) { return {code::unknown_peer, std::move(msg)}; }
  static status connect_failed(std::string msg) { return {code::connect_failed, std::move(msg)}; }
  static status connection_lost(std::string msg) { return {code::connection_lost, std::move(msg)}; }
  static status protocol_error(std::string msg) { return {code::protocol_error, std::move(msg)}; }
  static status io_error(std::string msg) { return {code::io_error, std::move(msg)}; }
  static status shut_down(std::string msg) { return {code::shut_down, std::move(msg)}; }
  static status fenced(std::string msg) { return {code::fenced, std::move(msg)}; }
  static status not_granted(std::string msg) { return {code::not_granted, std::move(msg)}; }

  /// Builds a status from a code read off the wire.
  static status from(code c, std::string msg) { return {c, std::move(msg)}; }

  bool ok() const { return code_ == code::ok; }
  code error_code() const { return code_; }
  const std::string& message() const { return message_; }

  /// "out_of_bounds: write of 4096 B at offset 131072 past region 3 (131072 B)", or "ok".
  std::string to_string() const;

  /// Marks a status as deliberately ignored.
  void ignore() const {}

 private:
  status(code c, std::string msg) : code_(c), message_(std::move(msg)) {}

  code code_ = code::ok;
  std::string message_;
};

/// A value or the status that says why there is none.
template <class T>
class [[nodiscard]] result {
 public:
  result(T value) : v_(std::move(value)) {}       // NOLINT: implicit on purpose
  result(status error) : v_(std::move(error)) {}  // NOLINT: implicit on purpose

  bool ok() const { return v_.index() == 0; }
  /// The error; status::ok() when a value is present.
  status error() const { return ok() ? status{} : std::get<1>(v_); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, status> v_;
};

}  // namespace kvferry::transport
