// The connections a wire receiver (tcp, shm, verbs) accepted, each served by
// a thread of its own: started on accept, joined once it ended (at the next
// accept), found by its sender's endpoint for disconnect(), and all woken
// and joined when the receiver stops.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <string>
#include <thread>

#include "transport/posix_socket.hpp"
#include "transport/wire_hello.hpp"

namespace kvferry::transport {

class connection_threads {
 public:
  struct connection {
    socket_fd fd;
    std::thread thread;
    std::atomic<bool> done{false};
    std::atomic<bool> disconnected{false};  ///< disconnect() named its sender
    std::string sender;                     ///< from its hello (guarded by the set's lock)
  };

  connection_threads() = default;
  connection_threads(const connection_threads&) = delete;
  connection_threads& operator=(const connection_threads&) = delete;
  ~connection_threads() { stop(); }

  /// Serves `fd` with `serve` on a new thread, which shuts the socket down
  /// when `serve` returns. Refused (the socket closed) once stop() ran.
  bool start(socket_fd fd, std::function<void(connection&)> serve) {
    std::lock_guard guard{mu_};
    reap_locked();
    if (stopped_)
      return false;
    auto& c = conns_.emplace_back();
    c.fd = std::move(fd);
    c.thread = std::thread{[&c, serve = std::move(serve)] {
      serve(c);
      c.fd.shutdown();
      c.done = true;
    }};
    return true;
  }

  /// Records the sender's endpoint, as its hello gave it.
  void name(connection& c, std::string sender) {
    std::lock_guard guard{mu_};
    c.sender = std::move(sender);
  }

  /// Reads the sender's hello on `c` and records its endpoint; false (serve
  /// nothing) for a hello that does not parse.
  template <class Hello>
  bool greet(connection& c, Hello& h, uint32_t max_name) {
    auto sender = receive_hello(c.fd.get(), h, max_name);
    if (!sender)
      return false;
    name(c, std::move(*sender));
    return true;
  }

  /// Accepts TCP connections on `listener` until it is shut down or
  /// `stopping` is set, tunes each (posix_socket's tune()) and serves it with
  /// `serve` on a thread of its own. Runs on the receiver's acceptor thread.
  void accept_tcp(int listener, const std::atomic<bool>& stopping,
                  const std::function<void(connection&)>& serve) {
    while (!stopping) {
      int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED)
          continue;
        return;  // listener shut down
      }
      tune(fd);
      if (!start(socket_fd{fd}, serve))
        return;
    }
  }

  /// Marks each live connection from `endpoint` disconnected and calls `cut`
  /// on it (which shuts its socket, in whole or in part).
  void disconnect(const std::string& endpoint, const std::function<void(connection&)>& cut) {
    std::lock_guard guard{mu_};
    for (auto& c : conns_)
      if (!c.done && c.sender == endpoint) {
        c.disconnected = true;
        cut(c);
      }
  }

  /// Wakes every connection and joins its thread, outside the lock (a thread
  /// may take it to name its sender). Later start()s are refused.
  void stop() {
    std::list<connection> conns;
    {
      std::lock_guard guard{mu_};
      stopped_ = true;
      conns.splice(conns.end(), conns_);
      for (auto& c : conns)
        c.fd.shutdown();
    }
    for (auto& c : conns)
      c.thread.join();
  }

 private:
  void reap_locked() {
    for (auto i = conns_.begin(); i != conns_.end();) {
      if (i->done) {
        i->thread.join();
        i = conns_.erase(i);
      } else {
        ++i;
      }
    }
  }

  std::mutex mu_;  // guards conns_, stopped_ and each connection's sender
  std::list<connection> conns_;
  bool stopped_ = false;
};

}  // namespace kvferry::transport
