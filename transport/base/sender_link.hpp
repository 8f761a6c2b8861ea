// A wire sender's connection to its peer, as the tcp streams and the verbs
// side channel both keep it: the socket, whether it is up, its generation
// (one more at each connection, so that a loss is acted on once, and only
// for the connection it hit) and the reader thread that takes the peer's
// answers on it. The owner guards it with its own lock; join_reader() alone
// is called outside it. fail_first_and_queued() is what both do when a
// connection cannot be made.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include "transport/base/posix_socket.hpp"
#include "transport/status.hpp"

namespace kvferry::transport {

class sender_link {
 public:
  sender_link() = default;
  sender_link(const sender_link&) = delete;
  sender_link& operator=(const sender_link&) = delete;
  /// The owner stops the link (shut(), then join_reader()) where its own stop
  /// order needs it; a link that goes without that still wakes its reader
  /// first, so it never waits on a reader blocked in a read.
  ~sender_link() {
    shut();
    join_reader();
  }

  bool up() const { return up_; }
  uint64_t generation() const { return generation_; }
  int fd() const { return fd_.get(); }

  /// Whether `generation` is the connection that is up now.
  bool current(uint64_t generation) const { return up_ && generation == generation_; }

  /// Joins the reader of the connection that ended (or was shut), so that
  /// its socket can be replaced. Outside the owner's lock.
  void join_reader() {
    if (reader_.joinable())
      reader_.join();
  }

  /// Takes `fd` as the new connection, up from now on, and starts
  /// `read(fd, generation)` on the reader thread. The previous reader was
  /// joined.
  void install(socket_fd fd, std::function<void(int, uint64_t)> read) {
    fd_ = std::move(fd);
    up_ = true;
    auto gen = ++generation_;
    reader_ = std::thread{[read = std::move(read), raw = fd_.get(), gen] { read(raw, gen); }};
  }

  /// Ends connection `generation` if it is the one up (its socket shut, the
  /// reader woken); false when it is not: ended already, or an older one.
  bool lose(uint64_t generation) {
    if (!current(generation))
      return false;
    up_ = false;
    fd_.shutdown();
    return true;
  }

  /// At stop: shuts the socket, which wakes the reader.
  void shut() { fd_.shutdown(); }

 private:
  socket_fd fd_;
  uint64_t generation_ = 0;
  bool up_ = false;
  std::thread reader_;
};

/// A connection could not be made: `first` (taken off the queue already) and
/// everything still queued under `mu` fail with `why`, outside the lock.
template <class Item, class Fail>
void fail_first_and_queued(std::mutex& mu, std::deque<Item>& queue, Item& first, const status& why,
                           Fail&& fail) {
  std::deque<Item> queued;
  {
    std::lock_guard guard{mu};
    queued.swap(queue);
  }
  fail(first, why);
  for (auto& item : queued)
    fail(item, why);
}

}  // namespace kvferry::transport
