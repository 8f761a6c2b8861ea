// The connections a wire receiver (tcp, shm, verbs) accepted, each served by
// a thread of its own: started on accept, joined once it ended (at the next
// accept), found by its sender's endpoint for disconnect(), and all woken
// and joined when the receiver stops. At most max_connections live at once
// (more are closed on accept); a connection that does not say hello and
// prove its credential within auth_timeout_ms is closed.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "transport/base/posix_socket.hpp"
#include "transport/base/wire_hello.hpp"

namespace kvferry::transport {

/// Live connections one receiver serves at most (threads, sockets): far
/// more than a cluster's senders open (streams x peers), and a bound on what
/// a flood of strangers can take.
constexpr size_t max_connections = 1024;

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
    if (conns_.size() >= max_connections) {
      ++refused_;
      return true;  // `fd` closes here; the listener carries on
    }
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

  /// Reads the sender's hello on `c`, has it prove its credential with `key`
  /// (`self`: the receiver's own endpoint) and records its endpoint; false
  /// (serve nothing) for a hello that does not parse in time, or a sender
  /// that fails the challenge.
  template <class Hello>
  bool greet(connection& c, Hello& h, uint32_t max_name, const peer_key& key,
             const std::string& self) {
    set_receive_timeout(c.fd.get(), auth_timeout_ms);
    auto sender = receive_hello(c.fd.get(), h, max_name);
    if (!sender || !key.verify(c.fd.get(), *sender, self).ok()) {
      ++refused_;
      return false;
    }
    set_receive_timeout(c.fd.get(), 0);
    name(c, std::move(*sender));
    return true;
  }

  /// Connections closed unserved: over the limit, or failing the hello.
  uint64_t refused() const { return refused_; }

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
        // Out of descriptors or memory: the connection waits in the
        // backlog; try again shortly instead of ending the loop for good.
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          std::this_thread::sleep_for(std::chrono::milliseconds{20});
          continue;
        }
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
  std::atomic<uint64_t> refused_{0};
};

}  // namespace kvferry::transport
