// Wraps any transport and injects faults into its posts, the way leveldb's
// fault-injection Env wraps an Env: chosen posts complete with an error, or
// throw (a post, or the opening of a fence), while every other call goes to
// the real backend. Or a post's bytes change in flight: one byte of its first
// write reads flipped while the backend copies it (end-to-end checksums' test;
// restored when post() returns, so for backends that copy inside post():
// inproc).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>

#include "transport/transport.hpp"

namespace kvferry::test {

namespace tp = ::kvferry::transport;

class faulty_transport final : public tp::transport {
 public:
  struct plan {
    std::mutex mu;
    std::map<uint64_t, tp::status> fail;       ///< post number → completion error
    std::map<uint64_t, std::string> throw_at;  ///< post number → exception text
    std::atomic<uint64_t> posts{0};
    std::map<uint64_t, std::string> throw_at_fence;  ///< open_fence number → exception text
    std::atomic<uint64_t> fences{0};
    /// Say the writes of a batch may land out of order (as a backend without
    /// ordered writes does): a last chunk's aux row then goes in a post of
    /// its own, once its KV landed.
    bool unordered_writes = false;
    std::set<uint64_t> flip;  ///< post numbers whose first write carries one flipped byte
  };

  faulty_transport(std::unique_ptr<tp::transport> inner, std::shared_ptr<plan> p)
      : inner_(std::move(inner)), plan_(std::move(p)) {}

  std::string_view name() const override { return inner_->name(); }
  tp::caps capabilities() const override {
    auto c = inner_->capabilities();
    if (plan_->unordered_writes)
      c.ordered_writes = false;
    return c;
  }
  std::string endpoint() const override { return inner_->endpoint(); }
  using tp::transport::register_region;
  tp::result<tp::region_id> register_region(void* base, uint64_t len,
                                            tp::memory_kind kind) override {
    auto id = inner_->register_region(base, len, kind);
    if (id.ok()) {
      std::lock_guard guard{plan_->mu};
      regions_[*id] = {static_cast<std::byte*>(base), len};
    }
    return id;
  }
  tp::status deregister_region(tp::region_id id) override { return inner_->deregister_region(id); }
  using tp::transport::connect;
  using tp::transport::open_fence;
  tp::result<tp::peer_id> connect(const std::string& endpoint,
                                  const std::string& credential) override {
    return inner_->connect(endpoint, credential);
  }
  std::string credential_for(const std::string& sender) const override {
    return inner_->credential_for(sender);
  }
  void open_fence(uint64_t token, tp::grant g) override {
    auto n = plan_->fences++;
    {
      std::lock_guard guard{plan_->mu};
      if (auto t = plan_->throw_at_fence.find(n); t != plan_->throw_at_fence.end())
        throw std::runtime_error(t->second);
    }
    inner_->open_fence(token, std::move(g));
  }
  bool close_fence(uint64_t token) override { return inner_->close_fence(token); }
  void disconnect(const std::string& endpoint) override { inner_->disconnect(endpoint); }
  void set_completion_handler(tp::completion_handler h) override {
    handler_ = h;
    inner_->set_completion_handler(std::move(h));
  }

  tp::status post(tp::peer_id peer, tp::write_batch batch) override {
    auto n = plan_->posts++;
    std::unique_lock guard{plan_->mu};
    if (auto t = plan_->throw_at.find(n); t != plan_->throw_at.end())
      throw std::runtime_error(t->second);
    if (auto f = plan_->fail.find(n); f != plan_->fail.end()) {
      auto st = f->second;
      guard.unlock();
      handler_(tp::completion{batch.cookie, st});
      return {};
    }
    std::byte* flipped = nullptr;
    if (plan_->flip.count(n) && !batch.ops.empty()) {
      auto& op = batch.ops.front();
      if (auto r = regions_.find(op.local);
          r != regions_.end() && op.length > 0 && op.local_offset + op.length <= r->second.second)
        flipped = r->second.first + op.local_offset + op.length / 2;
    }
    guard.unlock();
    if (flipped != nullptr)
      *flipped ^= std::byte{0x20};
    auto st = inner_->post(peer, std::move(batch));
    if (flipped != nullptr)
      *flipped ^= std::byte{0x20};
    return st;
  }

 private:
  std::unique_ptr<tp::transport> inner_;
  std::shared_ptr<plan> plan_;
  tp::completion_handler handler_;
  std::map<tp::region_id, std::pair<std::byte*, uint64_t>> regions_;  // guarded by plan_->mu
};

}  // namespace kvferry::test
