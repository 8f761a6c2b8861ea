// What the tcp, shm and verbs backends share above their own wire: the fence
// table and the peer key their receiver checks writes against, the receiver
// itself, one sender per peer, and the overrides that only delegate to them
// (post, the completion handler, credentials, fences, disconnect). Each
// backend keeps its regions, its listen step and its own connect; its
// destructor calls stop_io() before its own members go, since the receiver
// and the senders refer to them.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "transport/base/fence_table.hpp"
#include "transport/base/peer_auth.hpp"
#include "transport/base/peer_senders.hpp"
#include "transport/transport.hpp"

namespace kvferry::transport {

template <class Sender, class Receiver>
class socket_backend : public transport {
 public:
  using transport::open_fence;

  status post(peer_id peer, write_batch batch) override {
    return senders_.post(peer, std::move(batch));
  }

  void set_completion_handler(completion_handler handler) override {
    senders_.set_handler(std::move(handler));
  }

  std::string credential_for(const std::string& sender) const override {
    return key_.credential_for(sender);
  }

  void open_fence(uint64_t token, grant g) override { fences_.open(token, std::move(g)); }

  bool close_fence(uint64_t token) override { return fences_.close(token); }

  void disconnect(const std::string& endpoint) override { receiver_->disconnect(endpoint); }

 protected:
  /// `trust_every_peer`: no fence and no credential is checked (tests).
  explicit socket_backend(bool trust_every_peer)
      : fences_(trust_every_peer), key_(!trust_every_peer) {}

  /// Senders first (they fail their batches through the handler), then the
  /// receiver. Each backend's destructor calls it first.
  void stop_io() {
    senders_.clear();
    receiver_.reset();
  }

  fence_table fences_;
  const peer_key key_;
  std::unique_ptr<Receiver> receiver_;
  peer_senders<Sender> senders_;
};

}  // namespace kvferry::transport
