#include "transport/shm/shm_receiver.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <utility>
#include <vector>

#include "transport/base/admission_server.hpp"
#include "transport/base/wire_hello.hpp"
#include "transport/shared_memory.hpp"
#include "transport/shm/shm_wire.hpp"

namespace kvferry::transport::shm {

result<std::unique_ptr<shm_receiver>> shm_receiver::start(
    const std::string& name, std::string endpoint, const region_table& regions, fence_table& fences,
    const peer_key& key, shm_pins& pins, const shm_device_handles& handles) {
  auto listening = listen_abstract(name);
  if (!listening.ok())
    return listening.error();
  return std::unique_ptr<shm_receiver>{new shm_receiver(
      std::move(listening).value(), std::move(endpoint), regions, fences, key, pins, handles)};
}

shm_receiver::shm_receiver(socket_fd listener, std::string endpoint, const region_table& regions,
                           fence_table& fences, const peer_key& key, shm_pins& pins,
                           const shm_device_handles& handles)
    : regions_(regions),
      fences_(fences),
      key_(key),
      endpoint_(std::move(endpoint)),
      pins_(pins),
      handles_(handles),
      listener_(std::move(listener)),
      wake_(::eventfd(0, EFD_CLOEXEC)) {
  acceptor_ = std::thread{[this] { accept_loop(); }};
}

shm_receiver::~shm_receiver() {
  stopping_ = true;
  uint64_t one = 1;
  if (::write(wake_.get(), &one, sizeof(one)) < 0) {
    // Nothing else wakes the acceptor; the eventfd cannot be full at 1.
  }
  acceptor_.join();
  conns_.stop();
}

void shm_receiver::accept_loop() {
  while (!stopping_) {
    pollfd fds[2] = {{listener_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR)
        continue;
      return;
    }
    if (fds[1].revents != 0 || stopping_)
      return;
    int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      // Out of descriptors or memory: the peer waits in the backlog.
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
        std::this_thread::sleep_for(std::chrono::milliseconds{20});
      continue;  // the peer gave up, or EINTR: poll again
    }
    if (!conns_.start(socket_fd{fd}, [this](connection& c) { serve(c); }))
      return;
  }
}

void shm_receiver::disconnect(const std::string& endpoint) {
  // Admits nothing more from it (serve() checks `disconnected`); what is
  // admitted already stays busy until the sender reports it done.
  conns_.disconnect(endpoint, [](connection& c) { c.fd.shutdown_write(); });
}

void shm_receiver::serve(connection& conn) {
  int fd = conn.fd.get();
  // The abstract socket is open to every local user: only this process's
  // own user (or root) may map its memory.
  ucred peer{};
  socklen_t len = sizeof(peer);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 ||
      (peer.uid != ::geteuid() && peer.uid != 0))
    return;
  hello h;
  if (!conns_.greet(conn, h, max_name, key_, endpoint_))
    return;
  const std::string sender = conn.sender;  // set by greet(), fixed from now on
  // What the next reply brings along: grants of the regions the peer has
  // not mapped yet (a memfd each; a handle for device memory).
  std::vector<region_id> granted;  // sorted: regions whose memfd this peer holds
  std::vector<std::pair<grant, int>> grants;
  std::vector<std::pair<device_grant, std::vector<std::byte>>> device_grants;
  admission::backend_part part;
  part.wire = admission_magics;
  part.check = [&](const admission::begun_batch& b) -> status {
    auto held = regions_.guard();
    for (auto& op : b.ops) {
      auto dst = regions_.resolve(held, op.region, op.offset, op.length, "receiver");
      if (!dst.ok())
        return dst.error();
    }
    for (auto id : b.regions) {
      if (std::binary_search(granted.begin(), granted.end(), id))
        continue;
      auto base = *regions_.resolve(held, id, 0, 0, "receiver");
      auto length = regions_.length_of(held, id);
      if (regions_.kind_of(held, id) == memory_kind::device) {
        auto handle = handles_.find(id);
        if (!handle)
          return status::unknown_region("receiver region " + std::to_string(id) +
                                        " is device memory without a shared handle");
        device_grant g;
        g.region = id;
        g.length = length;
        g.handle_len = static_cast<uint32_t>(handle->size());
        device_grants.emplace_back(g, std::move(*handle));
        continue;
      }
      auto backing = find_shared_backing(base, length);
      if (!backing)
        return status::unknown_region("receiver region " + std::to_string(id) +
                                      " is no longer in shared memory (freed while registered)");
      grant g;
      g.region = id;
      g.length = length;
      g.file_offset = backing->offset;
      grants.emplace_back(g, backing->fd);
    }
    // Pinned under the guard: a deregistration after this waits for the end.
    pins_.pin(b.regions);
    return {};
  };
  // The grants go out even with a refusal (those prepared before it): the
  // peer maps them, and they are not sent again.
  part.answer = [&](uint64_t seq, const status& reply) -> status {
    auto memfds = std::exchange(grants, {});
    auto handles = std::exchange(device_grants, {});
    for (auto& [g, gfd] : memfds) {
      if (auto st = write_with_fd(fd, &g, sizeof(g), gfd); !st.ok())
        return st;
      granted.insert(std::upper_bound(granted.begin(), granted.end(), g.region), g.region);
    }
    for (auto& [g, handle] : handles) {
      std::vector<iovec> iov{{&g, sizeof(g)}, {handle.data(), handle.size()}};
      if (auto st = write_all(fd, iov); !st.ok())
        return st;
      granted.insert(std::upper_bound(granted.begin(), granted.end(), g.region), g.region);
    }
    return admission::send_reply(fd, reply_magic, seq, reply);
  };
  part.unpin = [&](const std::vector<region_id>& ids) { pins_.unpin(ids); };
  // The peer may still be copying a batch it was admitted: wait for its end of
  // the socket to close (it closes only after its last copy, or by exiting).
  part.quiesce = [&] {
    conn.fd.shutdown_write();
    char scratch[4096];
    for (;;) {
      auto n = ::recv(fd, scratch, sizeof(scratch), 0);
      if (n == 0 || (n < 0 && errno != EINTR))
        break;
    }
  };
  // disconnect(): the peer reads end-of-stream, but its ends still release.
  part.muted = &conn.disconnected;
  admission::serve(fd, fences_, sender, part);
}

}  // namespace kvferry::transport::shm
