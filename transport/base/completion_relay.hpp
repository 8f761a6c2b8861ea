// Where a backend's completions go: the handler set_completion_handler() set,
// called from whichever thread completes a batch. Backends that complete
// from their own threads (tcp, shm, verbs, auto) hold one.
#pragma once

#include <mutex>
#include <utility>

#include "transport/transport.hpp"

namespace kvferry::transport {

class completion_relay {
 public:
  void set(completion_handler handler) {
    std::lock_guard guard{mu_};
    handler_ = std::move(handler);
  }

  /// Calls the current handler, if any, outside the lock.
  void deliver(completion c) {
    completion_handler h;
    {
      std::lock_guard guard{mu_};
      h = handler_;
    }
    if (h)
      h(std::move(c));
  }

  /// A handler that delivers here, for the parts that complete batches.
  completion_handler to_here() {
    return [this](completion c) { deliver(std::move(c)); };
  }

 private:
  std::mutex mu_;  // guards handler_
  completion_handler handler_;
};

}  // namespace kvferry::transport
