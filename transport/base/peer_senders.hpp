// The senders of a wire backend (tcp, shm, verbs): one per connected peer,
// indexed by its peer_id, and the completion handler they all deliver to.
// connect() adds a sender, post() finds it, and the backend's destructor
// clears them (they fail their batches through the handler) before it stops
// its receiver.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "transport/base/completion_relay.hpp"
#include "transport/status.hpp"
#include "transport/transport.hpp"
#include "transport/write_op.hpp"

namespace kvferry::transport {

template <class Sender>
class peer_senders {
 public:
  peer_senders() = default;
  peer_senders(const peer_senders&) = delete;
  peer_senders& operator=(const peer_senders&) = delete;
  ~peer_senders() { clear(); }

  /// What a sender calls with each completion: the current handler.
  completion_handler relay() { return completions_.to_here(); }

  peer_id add(std::unique_ptr<Sender> sender) {
    std::lock_guard guard{mu_};
    senders_.push_back(std::move(sender));
    return static_cast<peer_id>(senders_.size() - 1);
  }

  status post(peer_id peer, write_batch batch) {
    std::lock_guard guard{mu_};
    if (peer >= senders_.size())
      return status::unknown_peer("peer " + std::to_string(peer) + " was never connected (" +
                                  std::to_string(senders_.size()) + " peers)");
    senders_[peer]->post(std::move(batch));
    return {};
  }

  void set_handler(completion_handler handler) { completions_.set(std::move(handler)); }

  /// Destroys every sender, outside the lock: a sender's last completions
  /// still reach the handler.
  void clear() {
    std::vector<std::unique_ptr<Sender>> senders;
    {
      std::lock_guard guard{mu_};
      senders.swap(senders_);
    }
    senders.clear();
  }

 private:
  std::mutex mu_;  // guards senders_
  std::vector<std::unique_ptr<Sender>> senders_;
  completion_relay completions_;
};

}  // namespace kvferry::transport
