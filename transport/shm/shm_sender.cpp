#include "transport/shm/shm_sender.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "transport/base/wire_hello.hpp"
#include "transport/shared_memory.hpp"
#include "transport/shm/shm_wire.hpp"

namespace kvferry::transport::shm {

namespace {

/// Batches begun ahead of the one being copied, so that the receiver's
/// admission of the next batch overlaps this batch's copy.
constexpr size_t begin_window = 4;

}  // namespace

shm_sender::shm_sender(std::string socket_name, std::string endpoint, sender_identity who,
                       const region_table& local, device_copier* device,
                       std::function<void(completion)> complete)
    : socket_name_(std::move(socket_name)),
      endpoint_(std::move(endpoint)),
      who_(std::move(who)),
      local_(local),
      device_(device),
      complete_(std::move(complete)),
      wake_(::eventfd(0, EFD_CLOEXEC)) {
  thread_ = std::thread{[this] { run(); }};
}

shm_sender::~shm_sender() {
  {
    std::lock_guard guard{mu_};
    stopping_ = true;
    // Wakes a reply read but lets the receiver see our end open until the
    // copy in progress is over and the socket is closed below.
    if (fd_.valid())
      ::shutdown(fd_.get(), SHUT_RD);
  }
  uint64_t one = 1;
  if (::write(wake_.get(), &one, sizeof(one)) < 0) {
    // An eventfd at 1 cannot be full.
  }
  thread_.join();
  auto why = status::shut_down("shm peer " + endpoint_ + ": transport closed");
  for (auto& p : pending_)
    fail(p.batch.cookie, p.at == pending_batch::stage::done ? p.result : why);
  pending_.clear();
  std::deque<write_batch> queued;
  {
    std::lock_guard guard{mu_};
    queued.swap(queue_);
    fd_.close();
  }
  for (auto& b : queued)
    fail(b.cookie, why);
  unmap_all();
}

void shm_sender::post(write_batch batch) {
  {
    std::lock_guard guard{mu_};
    if (!stopping_) {
      queue_.push_back(std::move(batch));
      uint64_t one = 1;
      if (::write(wake_.get(), &one, sizeof(one)) < 0) {
        // An eventfd cannot overflow at these counts.
      }
      return;
    }
  }
  fail(batch.cookie, status::shut_down("shm peer " + endpoint_ + ": transport closed"));
}

void shm_sender::run() {
  using stage = pending_batch::stage;
  for (;;) {
    {
      std::lock_guard guard{mu_};
      if (stopping_)
        return;
    }
    while (pending_.size() < begin_window) {
      pending_batch next;
      {
        std::lock_guard guard{mu_};
        if (queue_.empty() || stopping_)
          break;
        next.batch = std::move(queue_.front());
        queue_.pop_front();
      }
      if (!connected_) {
        if (auto st = connect(); !st.ok()) {
          // Without a connection nothing pending was begun (drop() failed
          // those): what waits is done. The rest fails to connect.
          auto why = status::connect_failed("shm peer " + endpoint_ + ": " + st.message());
          for (auto& p : pending_)
            complete_(completion{p.batch.cookie, p.result});
          pending_.clear();
          std::deque<write_batch> queued;
          {
            std::lock_guard guard{mu_};
            queued.swap(queue_);
          }
          fail(next.batch.cookie, why);
          for (auto& b : queued)
            fail(b.cookie, why);
          break;
        }
      }
      pending_.push_back(std::move(next));
      begin(pending_.back());
      if (!connected_)
        break;  // begin() lost the connection and failed what was pending
    }
    // Completions go out in post order.
    while (!pending_.empty() && pending_.front().at == stage::done) {
      complete_(completion{pending_.front().batch.cookie, std::move(pending_.front().result)});
      pending_.pop_front();
    }
    if (pending_.empty()) {
      wait_idle();
      continue;
    }
    // Copy the first admitted batch once nothing before it still waits for a
    // reply; otherwise wait for what the receiver says next.
    auto next = std::find_if(pending_.begin(), pending_.end(), [](auto& p) {
      return p.at == stage::awaiting_reply || p.at == stage::admitted;
    });
    if (next != pending_.end() && next->at == stage::admitted) {
      next->result = copy(next->batch);
      frame end;
      end.magic = end_magic;
      end.seq = next->seq;
      std::vector<iovec> iov{{&end, sizeof(end)}};
      if (auto st = write_all(fd_.get(), iov); !st.ok()) {
        drop(status::connection_lost("shm peer " + endpoint_ + ": " + st.message()));
        continue;
      }
      next->at = stage::awaiting_release;
      continue;
    }
    if (auto st = read_message(); !st.ok())
      drop(st);
  }
}

shm_sender::pending_batch* shm_sender::find_pending(uint64_t seq) {
  for (auto& p : pending_)
    if (p.seq == seq && p.at != pending_batch::stage::done)
      return &p;
  return nullptr;
}

void shm_sender::wait_idle() {
  pollfd fds[2] = {{wake_.get(), POLLIN, 0}, {fd_.get(), POLLIN | POLLRDHUP, 0}};
  int n = connected_ ? 2 : 1;
  if (::poll(fds, static_cast<nfds_t>(n), -1) < 0)
    return;
  if (fds[0].revents != 0) {
    uint64_t count;
    if (::read(wake_.get(), &count, sizeof(count)) < 0) {
      // Nothing to do: the next poll tells again.
    }
  }
  // Nothing is pending, so the receiver has nothing to say: readable means it
  // hung up (disconnect() or exit). Forget the connection; the next batch reconnects.
  if (n == 2 && fds[1].revents != 0)
    drop(status::connection_lost("shm peer " + endpoint_ + ": the receiver closed the connection"));
}

status shm_sender::connect() {
  auto fd = connect_abstract(socket_name_);
  if (!fd.ok())
    return fd.error();
  if (auto st = introduce(fd->get(), hello{}, who_, max_name); !st.ok())
    return st;
  std::lock_guard guard{mu_};
  if (stopping_)
    return status::shut_down("transport closed");
  fd_ = std::move(fd).value();
  connected_ = true;
  return {};
}

void shm_sender::begin(pending_batch& p) {
  auto& batch = p.batch;
  if (batch.ops.size() > max_ops_per_batch) {
    p.result =
        status::invalid_argument(std::to_string(batch.ops.size()) + " ops in one batch, at most " +
                                 std::to_string(max_ops_per_batch));
    p.at = pending_batch::stage::done;
    return;
  }
  std::vector<op_header> ops;
  ops.reserve(batch.ops.size());
  {
    auto held = local_.guard();
    for (auto& op : batch.ops) {
      auto src = local_.resolve(held, op.local, op.local_offset, op.length, "local");
      if (!src.ok()) {
        p.result = src.error();
        p.at = pending_batch::stage::done;
        return;
      }
      ops.push_back(op_header{op.remote, 0, op.remote_offset, op.length});
    }
  }
  p.seq = next_seq_++;
  frame f;
  f.magic = begin_magic;
  f.n_ops = static_cast<uint32_t>(ops.size());
  f.seq = p.seq;
  f.fence = batch.fence;
  std::vector<iovec> iov{{&f, sizeof(f)}, {ops.data(), ops.size() * sizeof(op_header)}};
  if (auto st = write_all(fd_.get(), iov); !st.ok())
    drop(status::connection_lost("shm peer " + endpoint_ + ": " + st.message()));
}

status shm_sender::read_message() {
  using stage = pending_batch::stage;
  // grant, device_grant and reply have the same size; the magic tells which came.
  static_assert(sizeof(grant) == sizeof(reply) && sizeof(device_grant) == sizeof(reply));
  alignas(8) std::byte buf[sizeof(reply)];
  int passed = -1;
  auto st = read_exact(fd_.get(), buf, sizeof(buf), &passed);
  if (!st.ok())
    return status::from(st.error_code(), "shm peer " + endpoint_ + ": " + st.message());
  uint32_t magic;
  std::memcpy(&magic, buf, sizeof(magic));
  if (magic == grant_magic) {
    grant g;
    std::memcpy(&g, buf, sizeof(g));
    if (passed < 0)
      return status::protocol_error("shm peer " + endpoint_ + ": grant of region " +
                                    std::to_string(g.region) + " came without its memfd");
    if (auto mapped = map_grant(passed, g.region, g.length, g.file_offset); !mapped.ok())
      return status::protocol_error("shm peer " + endpoint_ + ": " + mapped.message());
    return {};
  }
  if (magic == device_grant_magic) {
    if (passed >= 0)
      ::close(passed);
    device_grant g;
    std::memcpy(&g, buf, sizeof(g));
    if (auto mapped = map_device_grant(g); !mapped.ok())
      return status::from(
          is_link_error(mapped.error_code()) ? mapped.error_code() : code::protocol_error,
          "shm peer " + endpoint_ + ": " + mapped.message());
    return {};
  }
  if (passed >= 0)
    ::close(passed);
  reply v;
  std::memcpy(&v, buf, sizeof(v));
  auto* p = find_pending(v.seq);
  auto expected = magic == released_magic ? stage::awaiting_release : stage::awaiting_reply;
  if ((magic != reply_magic && magic != released_magic) || v.message_len > max_reply_message ||
      p == nullptr || p->at != expected)
    return status::protocol_error("shm peer " + endpoint_ + ": unexpected message (magic " +
                                  std::to_string(magic) + ") on batch " + std::to_string(v.seq));
  std::string message(v.message_len, '\0');
  if (auto rd = read_exact(fd_.get(), message.data(), message.size()); !rd.ok())
    return status::connection_lost("shm peer " + endpoint_ + ": " + rd.message());
  if (magic == released_magic) {
    p->at = stage::done;  // result holds the copy's outcome
    return {};
  }
  auto result = admission::reply_status(v.code, "shm peer " + endpoint_ + ": " + message);
  if (!result)
    return status::protocol_error("shm peer " + endpoint_ + ": reply code " +
                                  std::to_string(v.code) + " is not a transport code");
  if (result->ok()) {
    p->at = stage::admitted;
    return {};
  }
  p->result = std::move(*result);
  p->at = stage::done;
  return {};
}

status shm_sender::map_grant(int fd, uint64_t region, uint64_t length, uint64_t file_offset) {
  struct stat info {};
  auto close_fd = [fd] { ::close(fd); };
  if (::fstat(fd, &info) != 0) {
    close_fd();
    return status::io_error("fstat of region " + std::to_string(region) + "'s memfd");
  }
  auto size = static_cast<uint64_t>(info.st_size);
  int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & F_SEAL_SHRINK) == 0) {
    close_fd();
    return status::protocol_error("region " + std::to_string(region) +
                                  "'s memfd is not sealed against shrinking (seals " +
                                  std::to_string(seals) + ")");
  }
  if (length == 0 || file_offset > size || length > size - file_offset) {
    close_fd();
    return status::protocol_error("grant of region " + std::to_string(region) + ": " +
                                  std::to_string(length) + " B at offset " +
                                  std::to_string(file_offset) + " of a " + std::to_string(size) +
                                  " B memfd, expected a non-empty range inside it");
  }
  // The file's own page (2 MiB for a pool on huge pages): a mapping starts
  // and ends on one.
  auto page = std::max<uint64_t>(page_size(), static_cast<uint64_t>(info.st_blksize));
  auto aligned = file_offset / page * page;
  auto delta = file_offset - aligned;
  auto span = std::min((delta + length + page - 1) / page * page, size - aligned);
  void* p = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd,
                   static_cast<off_t>(aligned));
  auto err = errno;
  close_fd();
  if (p == MAP_FAILED)
    return status::io_error("mmap of region " + std::to_string(region) + " (" +
                            std::to_string(length) + " B): " + std::strerror(err));
  auto id = static_cast<region_id>(region);
  if (auto old = mapped_.find(id); old != mapped_.end())
    unmap(old->second);
  mapped_region m{static_cast<std::byte*>(p) + delta, length, p, span, {}, false};
  // With a device copier, copies from device memory land here: pinned, they
  // go by DMA rather than through CUDA's own staging. Unpinned still works.
  if (device_)
    m.pinned = device_->pin_host(p, span).ok();
  mapped_[id] = std::move(m);
  return {};
}

status shm_sender::map_device_grant(const device_grant& g) {
  if (g.handle_len == 0 || g.handle_len > max_device_handle)
    return status::protocol_error("device grant of region " + std::to_string(g.region) +
                                  " with a handle of " + std::to_string(g.handle_len) +
                                  " B, expected 1 to " + std::to_string(max_device_handle));
  std::vector<std::byte> handle(g.handle_len);
  if (auto st = read_exact(fd_.get(), handle.data(), handle.size()); !st.ok())
    return status::connection_lost(st.message());
  if (!device_)
    return status::invalid_argument("region " + std::to_string(g.region) +
                                    " is device memory, and this sender has no device copier");
  if (g.length == 0)
    return status::protocol_error("device grant of region " + std::to_string(g.region) + " of 0 B");
  auto opened = device_->open_shared(handle, g.length);
  if (!opened.ok())
    return status::io_error("opening device region " + std::to_string(g.region) + ": " +
                            opened.error().message());
  auto id = static_cast<region_id>(g.region);
  if (auto old = mapped_.find(id); old != mapped_.end())
    unmap(old->second);
  auto mem = std::move(opened).value();
  mapped_[id] = mapped_region{mem.get(), g.length, nullptr, 0, std::move(mem), false};
  return {};
}

status shm_sender::copy(const write_batch& batch) {
  auto held = local_.guard();
  struct copy_job {
    const std::byte* src;
    std::byte* dst;
    bool device;  // either end is device memory: the copier copies
  };
  std::vector<copy_job> copies;
  copies.reserve(batch.ops.size());
  for (auto& op : batch.ops) {
    auto src = local_.resolve(held, op.local, op.local_offset, op.length, "local");
    if (!src.ok())
      return src.error();
    auto m = mapped_.find(op.remote);
    if (m == mapped_.end())
      return status::protocol_error("shm peer " + endpoint_ + " admitted a write into region " +
                                    std::to_string(op.remote) + " but never granted it");
    // The receiver checked this op against the same length; checked again
    // because a mapping is the one thing between a bad offset and its memory.
    if (op.remote_offset > m->second.length || op.length > m->second.length - op.remote_offset)
      return status::out_of_bounds("write of " + std::to_string(op.length) + " B at offset " +
                                   std::to_string(op.remote_offset) + " past shm peer " +
                                   endpoint_ + " region " + std::to_string(op.remote) + " (" +
                                   std::to_string(m->second.length) + " B)");
    bool device = m->second.device || local_.kind_of(held, op.local) == memory_kind::device;
    if (device && !device_)
      return status::invalid_argument("a write from local device memory region " +
                                      std::to_string(op.local) + ", and no device copier");
    copies.push_back({*src, m->second.base + op.remote_offset, device});
  }
  for (size_t i = 0; i < copies.size(); ++i) {
    auto& c = copies[i];
    if (!c.device)
      std::memcpy(c.dst, c.src, batch.ops[i].length);
    else if (auto st = device_->copy(c.dst, c.src, batch.ops[i].length); !st.ok())
      return st;
  }
  return {};
}

void shm_sender::drop(const status& why) {
  bool stopping;
  {
    std::lock_guard guard{mu_};
    stopping = stopping_;
    fd_.close();
  }
  connected_ = false;
  unmap_all();
  auto cause = stopping ? status::shut_down("shm peer " + endpoint_ + ": transport closed") : why;
  for (auto& p : pending_)
    fail(p.batch.cookie, p.at == pending_batch::stage::done ? p.result : cause);
  pending_.clear();
}

void shm_sender::unmap(mapped_region& m) {
  if (m.pinned)
    device_->unpin_host(m.map_base);
  if (m.map_base)
    ::munmap(m.map_base, m.map_len);
  m = mapped_region{nullptr, 0, nullptr, 0, {}, false};  // a device mapping closes here
}

void shm_sender::unmap_all() {
  for (auto& [id, m] : mapped_)
    unmap(m);
  mapped_.clear();
}

}  // namespace kvferry::transport::shm
