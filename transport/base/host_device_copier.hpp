// A device_copier over ordinary host memory: what the backends' device paths
// run on where there is no GPU (the tests, and `kvferry-demo --device-memory
// --device host`). "Device" memory here is host memory that the backends must
// treat as device memory: they never touch it themselves, every byte goes
// through read(), write() or copy(), in pieces of `piece_bytes` through a
// bounce buffer, and the counters say how much went which way.
//
// Handles of export_shared() name an address of this process: open_shared()
// resolves a handle made by this same process only (a test keeps both ends of
// a transport in one process); another process's handle is refused.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

#include "transport/device_memory.hpp"

namespace kvferry::transport {

class host_device_copier final : public device_copier {
 public:
  struct options {
    uint64_t piece_bytes = 64 << 10;
    /// Fault injection: the piece with this number (counting every piece read
    /// or written, from 1) fails with io_error; 0 never.
    uint64_t fail_piece = 0;
  };

  struct counts {
    uint64_t pieces_read = 0;     ///< device -> host pieces
    uint64_t pieces_written = 0;  ///< host -> device pieces
    uint64_t copies = 0;          ///< copy() calls
    uint64_t segment_copies = 0;  ///< copy_segments() calls
    uint64_t opened = 0;          ///< open_shared() calls that succeeded
  };

  host_device_copier() : host_device_copier(options{}) {}
  explicit host_device_copier(options opt);

  std::string_view name() const override { return "host"; }
  status read(const std::byte* src, uint64_t bytes, const read_piece& on_piece) override;
  status write(std::byte* dst, uint64_t bytes, const fill_piece& fill) override;
  status copy(void* dst, const void* src, uint64_t bytes) override;
  status copy_segments(std::span<std::byte> dst, std::span<const std::byte> src,
                       std::span<const copy_segment> segments) override;
  status pin_host(void* base, uint64_t bytes) override;
  void unpin_host(void* base) override;
  result<std::vector<std::byte>> export_shared(void* base, uint64_t bytes) override;
  result<std::shared_ptr<std::byte>> open_shared(std::span<const std::byte> handle,
                                                 uint64_t bytes) override;

  counts counted() const;

 private:
  /// Counts one piece; the injected fault when it is the one.
  status next_piece(std::atomic<uint64_t>& counter);

  const options opt_;
  std::atomic<uint64_t> pieces_ = 0;
  std::atomic<uint64_t> read_ = 0;
  std::atomic<uint64_t> written_ = 0;
  std::atomic<uint64_t> copies_ = 0;
  std::atomic<uint64_t> segment_copies_ = 0;
  std::atomic<uint64_t> opened_ = 0;
};

}  // namespace kvferry::transport
