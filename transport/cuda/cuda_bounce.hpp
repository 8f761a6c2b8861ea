// Device memory through pinned host buffers, for the host transports (tcp,
// shm) that cannot read or write GPU memory: a region moves in pieces through
// a few pinned buffers on one stream, so the copy of the next pieces overlaps
// the send (or receive) of the current one.
//
//   drain: device --cudaMemcpyAsync--> pinned[i % N] --on_piece(i)--> wire
//   fill:  wire --fill_piece(i)--> pinned[i % N] --cudaMemcpyAsync--> device
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "transport/status.hpp"

namespace kvferry::transport::cuda {

/// N pinned buffers of one piece each, a stream and an event per buffer.
/// One drain or fill at a time (the caller's thread runs the callbacks);
/// different pipelines are independent. Move-only.
class bounce_pipeline {
 public:
  struct options {
    size_t piece_bytes = size_t{4} << 20;  ///< bytes per piece (the last may be shorter)
    size_t buffers = 3;                    ///< pinned buffers (>= 2 for any overlap)
  };

  /// Called for each piece in order once it is in host memory; `piece` is valid
  /// only during the call. A status that is not ok stops the drain.
  using ready_piece = std::function<status(uint64_t offset, std::span<const std::byte> piece)>;
  /// Called for each piece in order to fill `piece` with the bytes of
  /// [offset, offset + piece.size()); a status that is not ok stops the fill.
  using fill_piece = std::function<status(uint64_t offset, std::span<std::byte> piece)>;

  /// Allocates the pinned buffers, the stream and the events on the current
  /// device. invalid_argument for a zero piece size or no buffer.
  static result<bounce_pipeline> create(options opt);

  bounce_pipeline(bounce_pipeline&&) noexcept;
  bounce_pipeline& operator=(bounce_pipeline&&) noexcept;
  ~bounce_pipeline();

  /// Moves `bytes` from `device_src` (any address CUDA can copy from) to the
  /// host piece by piece: while on_piece(i) runs, the copies of pieces
  /// i + 1 .. i + N - 1 are under way. Returns once every piece was handed
  /// over, or with the first error (a CUDA call's, or on_piece's own), after
  /// waiting for the copies still in flight.
  status drain(const std::byte* device_src, uint64_t bytes, const ready_piece& on_piece);

  /// Moves `bytes` from the host to `device_dst` piece by piece: fill_piece(i)
  /// runs while piece i - 1 is copied to the device. Returns once every byte
  /// is in device memory, or with the first error.
  status fill(std::byte* device_dst, uint64_t bytes, const fill_piece& fill_piece);

  size_t piece_bytes() const;
  size_t buffers() const;

 private:
  struct state;
  explicit bounce_pipeline(std::unique_ptr<state> s);

  std::unique_ptr<state> s_;
};

}  // namespace kvferry::transport::cuda
