// The receiving half of the shm backend: accepts peers on an abstract Unix
// socket and admits their batches. Each begun batch is checked whole (fence,
// regions, bounds) before the peer may copy a byte; an admitted batch holds its
// fence and regions busy until the peer's end or its death. The peer maps only
// the regions granted to it (the memfds of registered regions, never more), so
// its copies cannot land outside registered memory.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "transport/base/connection_threads.hpp"
#include "transport/base/fence_table.hpp"
#include "transport/base/peer_auth.hpp"
#include "transport/base/region_table.hpp"
#include "transport/shm/shm_device_handles.hpp"
#include "transport/shm/shm_pins.hpp"
#include "transport/shm/shm_socket.hpp"

namespace kvferry::transport::shm {

class shm_receiver {
 public:
  /// Listens on abstract socket `name` (`endpoint`: its shm:// name). A peer
  /// must run as this process's user (or root) and prove a credential of
  /// `key`. `regions`, `fences`, `key`, `pins` and `handles` (of the device
  /// regions) must outlive the receiver.
  static result<std::unique_ptr<shm_receiver>> start(const std::string& name, std::string endpoint,
                                                     const region_table& regions,
                                                     fence_table& fences, const peer_key& key,
                                                     shm_pins& pins,
                                                     const shm_device_handles& handles);

  shm_receiver(const shm_receiver&) = delete;
  shm_receiver& operator=(const shm_receiver&) = delete;

  /// Closes the listener and every connection, and joins their threads.
  ~shm_receiver();

  /// Stops admitting batches from the sender named `endpoint` and tells it the
  /// connection is over. Batches it was already admitted stay busy until it
  /// ends them or exits: a copy in another process cannot be stopped from here.
  void disconnect(const std::string& endpoint);

 private:
  using connection = connection_threads::connection;

  shm_receiver(socket_fd listener, std::string endpoint, const region_table& regions,
               fence_table& fences, const peer_key& key, shm_pins& pins,
               const shm_device_handles& handles);

  void accept_loop();
  void serve(connection& conn);

  const region_table& regions_;
  fence_table& fences_;
  const peer_key& key_;
  const std::string endpoint_;
  shm_pins& pins_;
  const shm_device_handles& handles_;
  socket_fd listener_;
  socket_fd wake_;  ///< eventfd that stops accept_loop
  std::atomic<bool> stopping_{false};
  connection_threads conns_;
  std::thread acceptor_;
};

}  // namespace kvferry::transport::shm
