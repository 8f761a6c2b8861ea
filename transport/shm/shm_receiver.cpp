#include "transport/shm/shm_receiver.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <deque>
#include <vector>

#include "transport/base/wire_hello.hpp"
#include "transport/shared_memory.hpp"
#include "transport/shm/shm_wire.hpp"

namespace kvferry::transport::shm {

namespace {

/// A batch the peer may be copying: what it holds busy here.
struct admitted_batch {
  uint64_t seq;
  uint64_t fence;
  std::vector<region_id> regions;
};

status send_verdict(int fd, uint64_t seq, const status& st) {
  verdict v;
  v.magic = verdict_magic;
  v.seq = seq;
  v.code = static_cast<uint8_t>(st.error_code());
  auto msg = st.message().substr(0, max_verdict_message);
  v.message_len = static_cast<uint32_t>(msg.size());
  std::vector<iovec> iov{{&v, sizeof(v)}, {msg.data(), msg.size()}};
  return write_all(fd, iov);
}

}  // namespace

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
  std::deque<admitted_batch> admitted;
  std::vector<region_id> granted;  // sorted: regions whose memfd this peer holds
  std::vector<op_header> ops;
  auto release = [&](admitted_batch& b) {
    fences_.leave(b.fence);
    pins_.unpin(b.regions);
  };
  for (;;) {
    frame f;
    if (!read_exact(fd, &f, sizeof(f)).ok())
      break;
    if (f.magic == end_magic) {
      // Ends come in begin order; anything else means the peer lost track.
      if (admitted.empty() || admitted.front().seq != f.seq)
        break;
      release(admitted.front());
      admitted.pop_front();
      if (conn.disconnected)
        continue;  // disconnected: the peer reads end-of-stream instead
      verdict done;
      done.magic = released_magic;
      done.seq = f.seq;
      std::vector<iovec> iov{{&done, sizeof(done)}};
      if (!write_all(fd, iov).ok())
        break;
      continue;
    }
    if (f.magic != begin_magic || f.n_ops > max_ops_per_batch || !read_items(fd, ops, f.n_ops).ok())
      break;
    if (conn.disconnected)
      continue;  // disconnected: the peer reads end-of-stream instead of a verdict
    status verdict_status;
    admitted_batch batch{f.seq, f.fence, {}};
    std::vector<std::pair<grant, int>> grants;
    std::vector<std::pair<device_grant, std::vector<std::byte>>> device_grants;
    if (auto admitted_st = fences_.enter(f.fence, sender, ops); !admitted_st.ok()) {
      verdict_status = std::move(admitted_st);
    } else {
      auto held = regions_.guard();
      for (auto& op : ops) {
        auto dst = regions_.resolve(held, op.region, op.offset, op.length, "receiver");
        if (!dst.ok()) {
          verdict_status = dst.error();
          break;
        }
        if (std::find(batch.regions.begin(), batch.regions.end(), op.region) == batch.regions.end())
          batch.regions.push_back(op.region);
      }
      for (auto id : batch.regions) {
        if (!verdict_status.ok() || std::binary_search(granted.begin(), granted.end(), id))
          continue;
        auto base = *regions_.resolve(held, id, 0, 0, "receiver");
        auto length = regions_.length_of(held, id);
        if (regions_.kind_of(held, id) == memory_kind::device) {
          auto handle = handles_.find(id);
          if (!handle) {
            verdict_status = status::unknown_region("receiver region " + std::to_string(id) +
                                                    " is device memory without a shared handle");
            break;
          }
          device_grant g;
          g.region = id;
          g.length = length;
          g.handle_len = static_cast<uint32_t>(handle->size());
          device_grants.emplace_back(g, std::move(*handle));
          continue;
        }
        auto backing = find_shared_backing(base, length);
        if (!backing) {
          verdict_status =
              status::unknown_region("receiver region " + std::to_string(id) +
                                     " is no longer in shared memory (freed while registered)");
          break;
        }
        grant g;
        g.region = id;
        g.length = length;
        g.file_offset = backing->offset;
        grants.emplace_back(g, backing->fd);
      }
      // Pinned under the guard: a deregistration after this waits for the end.
      if (verdict_status.ok())
        pins_.pin(batch.regions);
      else
        fences_.leave(f.fence);
    }
    bool sent = true;
    for (auto& [g, gfd] : grants) {
      if (!(sent = write_with_fd(fd, &g, sizeof(g), gfd).ok()))
        break;
      granted.insert(std::upper_bound(granted.begin(), granted.end(), g.region), g.region);
    }
    for (auto& [g, handle] : device_grants) {
      if (!sent)
        break;
      std::vector<iovec> iov{{&g, sizeof(g)}, {handle.data(), handle.size()}};
      if (!(sent = write_all(fd, iov).ok()))
        break;
      granted.insert(std::upper_bound(granted.begin(), granted.end(), g.region), g.region);
    }
    if (verdict_status.ok())
      admitted.push_back(std::move(batch));
    if (!sent || !send_verdict(fd, f.seq, verdict_status).ok())
      break;
  }
  // The peer may still be copying a batch it was admitted: wait for its end of
  // the socket to close (it closes only after its last copy, or by exiting),
  // then release what it held.
  conn.fd.shutdown_write();
  char scratch[4096];
  for (;;) {
    auto n = ::recv(fd, scratch, sizeof(scratch), 0);
    if (n == 0 || (n < 0 && errno != EINTR))
      break;
  }
  for (auto& b : admitted)
    release(b);
}

}  // namespace kvferry::transport::shm
