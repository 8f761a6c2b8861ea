#include "transport/base/host_device_copier.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "transport/base/process_nonce.hpp"

namespace kvferry::transport {

namespace {

/// What export_shared() hands out: this process (this_process(), not its pid
/// alone) and the address.
struct shared_handle {
  uint32_t magic = 0x4B564448;  // "KVDH"
  uint32_t pid = 0;
  uint64_t address = 0;
  uint64_t bytes = 0;
  uint64_t process = 0;
};

}  // namespace

std::string_view to_string(memory_kind k) {
  return k == memory_kind::device ? "device" : "host";
}

host_device_copier::host_device_copier(options opt) : opt_(opt) {}

status host_device_copier::next_piece(std::atomic<uint64_t>& counter) {
  auto n = ++pieces_;
  if (opt_.fail_piece != 0 && n == opt_.fail_piece)
    return status::io_error("host device copier: injected fault at piece " + std::to_string(n));
  ++counter;
  return {};
}

status host_device_copier::read(const std::byte* src, uint64_t bytes, const read_piece& on_piece) {
  std::vector<std::byte> bounce(std::min(opt_.piece_bytes, bytes));
  for (uint64_t off = 0; off < bytes; off += opt_.piece_bytes) {
    auto len = std::min(opt_.piece_bytes, bytes - off);
    if (auto st = next_piece(read_); !st.ok())
      return st;
    std::memcpy(bounce.data(), src + off, len);
    if (auto st = on_piece(off, {bounce.data(), len}); !st.ok())
      return st;
  }
  return {};
}

status host_device_copier::write(std::byte* dst, uint64_t bytes, const fill_piece& fill) {
  std::vector<std::byte> bounce(std::min(opt_.piece_bytes, bytes));
  for (uint64_t off = 0; off < bytes; off += opt_.piece_bytes) {
    auto len = std::min(opt_.piece_bytes, bytes - off);
    if (auto st = fill(off, {bounce.data(), len}); !st.ok())
      return st;
    if (auto st = next_piece(written_); !st.ok())
      return st;
    std::memcpy(dst + off, bounce.data(), len);
  }
  return {};
}

status host_device_copier::copy(void* dst, const void* src, uint64_t bytes) {
  ++copies_;
  if (bytes > 0)
    std::memmove(dst, src, bytes);
  return {};
}

status host_device_copier::copy_segments(std::span<std::byte> dst, std::span<const std::byte> src,
                                         std::span<const copy_segment> segments) {
  ++segment_copies_;
  return copy_segments_cpu(dst, src, segments);
}

status host_device_copier::pin_host(void* base, uint64_t bytes) {
  if (base == nullptr || bytes == 0)
    return status::invalid_argument("pinning " + std::to_string(bytes) +
                                    " B: expected a non-null base and a length above 0");
  return {};
}

void host_device_copier::unpin_host(void*) {}

result<std::vector<std::byte>> host_device_copier::export_shared(void* base, uint64_t bytes) {
  shared_handle h;
  h.pid = static_cast<uint32_t>(::getpid());
  h.address = reinterpret_cast<uintptr_t>(base);
  h.bytes = bytes;
  h.process = this_process();
  std::vector<std::byte> out(sizeof(h));
  std::memcpy(out.data(), &h, sizeof(h));
  return out;
}

result<std::shared_ptr<std::byte>> host_device_copier::open_shared(
    std::span<const std::byte> handle, uint64_t bytes) {
  shared_handle h;
  if (handle.size() != sizeof(h))
    return status::invalid_argument("a host device handle of " + std::to_string(handle.size()) +
                                    " B, expected " + std::to_string(sizeof(h)));
  std::memcpy(&h, handle.data(), sizeof(h));
  if (h.magic != shared_handle{}.magic)
    return status::invalid_argument("not a host device handle (wrong magic)");
  if (h.pid != static_cast<uint32_t>(::getpid()) || h.process != this_process())
    return status::invalid_argument("a host device handle of process " + std::to_string(h.pid) +
                                    ": only handles of this process (" +
                                    std::to_string(::getpid()) + ") can be opened");
  if (bytes > h.bytes)
    return status::out_of_bounds("opening " + std::to_string(bytes) + " B of a shared region of " +
                                 std::to_string(h.bytes) + " B");
  ++opened_;
  // Nothing to unmap: the memory is the exporter's own.
  return std::shared_ptr<std::byte>{reinterpret_cast<std::byte*>(h.address), [](std::byte*) {}};
}

host_device_copier::counts host_device_copier::counted() const {
  return counts{read_.load(), written_.load(), copies_.load(), segment_copies_.load(),
                opened_.load()};
}

}  // namespace kvferry::transport
