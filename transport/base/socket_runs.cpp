#include "transport/base/socket_runs.hpp"

#include <algorithm>
#include <string>

#include "transport/base/posix_socket.hpp"

namespace kvferry::transport {

namespace {

status no_copier(const memory_run& r) {
  return status::invalid_argument("a run of " + std::to_string(r.length) +
                                  " B in device memory, and no device copier to move it");
}

}  // namespace

void append_run(std::vector<memory_run>& runs, std::byte* base, uint64_t length, memory_kind kind) {
  if (length == 0)
    return;
  // Device runs are never merged: two regions adjacent in the address space
  // may be two allocations, which one copy must not cross.
  if (!runs.empty() && kind == memory_kind::host && runs.back().kind == kind &&
      runs.back().base + runs.back().length == base)
    runs.back().length += length;
  else
    runs.push_back({base, length, kind});
}

status send_runs(int fd, std::vector<iovec> head, const std::vector<memory_run>& runs,
                 device_copier* device) {
  if (!device)
    for (auto& r : runs)
      if (r.kind == memory_kind::device)
        return no_copier(r);
  auto& iov = head;
  for (auto& r : runs) {
    if (r.kind == memory_kind::host) {
      iov.push_back({r.base, r.length});
      continue;
    }
    if (!iov.empty()) {
      if (auto st = write_all(fd, iov); !st.ok())
        return st;
      iov.clear();
    }
    auto st = device->read(r.base, r.length, [fd](uint64_t, std::span<const std::byte> piece) {
      std::vector<iovec> one{{const_cast<std::byte*>(piece.data()), piece.size()}};
      return write_all(fd, one);
    });
    if (!st.ok())
      return st;
  }
  return iov.empty() ? status{} : write_all(fd, iov);
}

receive_outcome receive_runs(int fd, const std::vector<memory_run>& runs, device_copier* device) {
  receive_outcome out;
  std::vector<iovec> iov;
  auto flush = [&] {
    if (!iov.empty())
      out.link = read_all(fd, iov);
    iov.clear();
    return out.link.ok();
  };
  uint64_t unread = 0;  // bytes left on the socket once a device run failed
  for (size_t i = 0; i < runs.size(); ++i) {
    auto& r = runs[i];
    if (!out.placed.ok()) {
      unread += r.length;
      continue;
    }
    if (r.kind == memory_kind::host) {
      iov.push_back({r.base, r.length});
      continue;
    }
    if (!flush())
      return out;
    if (!device) {
      out.placed = no_copier(r);
      unread += r.length;
      continue;
    }
    uint64_t consumed = 0;
    status socket;
    out.placed = device->write(r.base, r.length, [&](uint64_t, std::span<std::byte> piece) {
      socket = read_exact(fd, piece.data(), piece.size());
      if (socket.ok())
        consumed += piece.size();
      return socket;
    });
    if (!socket.ok()) {
      out.link = socket;
      return out;
    }
    if (!out.placed.ok())
      unread += r.length - consumed;
  }
  if (!out.placed.ok()) {
    // A device run failed: the rest of the batch is read and thrown away, so
    // the stream stays in step and only this batch is refused.
    out.link = discard_exact(fd, unread);
    return out;
  }
  flush();
  return out;
}

}  // namespace kvferry::transport
