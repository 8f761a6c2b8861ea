#include "transport/auto/auto_transport.hpp"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <mutex>
#include <vector>

#include "transport/base/completion_relay.hpp"

namespace kvferry::transport::automatic {

namespace {

constexpr std::string_view scheme = "auto://";

/// This host and network namespace: peers with the same identity reach each
/// other's abstract Unix sockets and can share memory.
std::string host_identity() {
  std::string boot;
  std::ifstream{"/proc/sys/kernel/random/boot_id"} >> boot;
  char ns[128] = {};
  auto n = ::readlink("/proc/self/ns/net", ns, sizeof(ns) - 1);
  std::string id = boot + "/" + (n > 0 ? std::string(ns, static_cast<size_t>(n)) : "");
  std::replace(id.begin(), id.end(), ';', '_');
  return id;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == sep) {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  return out;
}

class auto_transport final : public transport {
 public:
  auto_transport(std::unique_ptr<transport> shm, std::unique_ptr<transport> tcp)
      : shm_(std::move(shm)), tcp_(std::move(tcp)), host_(host_identity()) {
    auto forward = completions_.to_here();
    if (shm_)
      shm_->set_completion_handler(forward);
    tcp_->set_completion_handler(forward);
  }

  std::string_view name() const override { return "auto"; }

  caps capabilities() const override {
    auto c = tcp_->capabilities();
    if (shm_) {
      auto s = shm_->capabilities();
      c.ordered_writes = c.ordered_writes && s.ordered_writes;
      c.device_memory = c.device_memory && s.device_memory;
      c.max_write_bytes = std::min(c.max_write_bytes, s.max_write_bytes);
    }
    return c;
  }

  std::string endpoint() const override {
    std::lock_guard guard{mu_};
    std::string out{scheme};
    out += host_;
    if (shm_usable_)
      out += ";" + shm_->endpoint();
    return out + ";" + tcp_->endpoint();
  }

  using transport::register_region;

  result<region_id> register_region(void* base, uint64_t length, memory_kind kind) override {
    std::lock_guard guard{mu_};
    auto id = tcp_->register_region(base, length, kind);
    if (!id.ok() || !shm_usable_)
      return id;
    // Region ids agree because both backends saw the same registrations; once
    // shm refuses one (memory that is not shared), it takes no more and no peer
    // is offered it.
    auto same = shm_->register_region(base, length, kind);
    if (!same.ok() || *same != *id)
      shm_usable_ = false;
    return id;
  }

  status deregister_region(region_id id) override {
    bool shm_too;
    {
      std::lock_guard guard{mu_};
      shm_too = shm_usable_;
    }
    auto st = tcp_->deregister_region(id);
    if (st.ok() && shm_too)
      shm_->deregister_region(id).ignore();
    return st;
  }

  using transport::connect;
  using transport::open_fence;

  /// One credential per backend the sender may reach us by: "tcp=<c>;shm=<c>"
  /// for the parts of its composite endpoint.
  std::string credential_for(const std::string& sender) const override {
    std::string out;
    for (auto& part : parts_of(sender)) {
      if (part.rfind("tcp://", 0) == 0)
        out += (out.empty() ? "" : ";") + std::string{"tcp="} + tcp_->credential_for(part);
      else if (part.rfind("shm://", 0) == 0 && shm_)
        out += (out.empty() ? "" : ";") + std::string{"shm="} + shm_->credential_for(part);
    }
    return out;
  }

  result<peer_id> connect(const std::string& endpoint, const std::string& credential) override {
    auto parts = split(endpoint.rfind(scheme, 0) == 0 ? endpoint.substr(scheme.size()) : "", ';');
    std::string shm_part, tcp_part;
    for (size_t i = 1; i < parts.size(); ++i) {
      if (parts[i].rfind("shm://", 0) == 0)
        shm_part = parts[i];
      else if (parts[i].rfind("tcp://", 0) == 0)
        tcp_part = parts[i];
    }
    if (parts.size() < 2 || tcp_part.empty())
      return status::invalid_argument("endpoint '" + endpoint +
                                      "', expected auto://<host>;[shm://...;]tcp://...");
    std::lock_guard guard{mu_};
    bool local = parts[0] == host_ && !shm_part.empty() && shm_usable_;
    auto& via = local ? shm_ : tcp_;
    auto peer =
        via->connect(local ? shm_part : tcp_part, part_of(credential, local ? "shm" : "tcp"));
    if (!peer.ok())
      return peer.error();
    routes_.push_back({via.get(), *peer});
    return static_cast<peer_id>(routes_.size() - 1);
  }

  status post(peer_id peer, write_batch batch) override {
    route r;
    {
      std::lock_guard guard{mu_};
      if (peer >= routes_.size())
        return status::unknown_peer("peer " + std::to_string(peer) + " was never connected (" +
                                    std::to_string(routes_.size()) + " peers)");
      r = routes_[peer];
    }
    return r.via->post(r.peer, std::move(batch));
  }

  void set_completion_handler(completion_handler handler) override {
    completions_.set(std::move(handler));
  }

  /// Each backend admits the grant's senders by the part of their composite
  /// endpoint that reaches it (its hellos name that part).
  void open_fence(uint64_t token, grant g) override {
    auto for_backend = [&](const std::string& scheme) {
      grant one{{}, g.buffers};
      for (auto& sender : g.senders)
        for (auto& part : parts_of(sender))
          if (part.rfind(scheme, 0) == 0)
            one.senders.push_back(part);
      return one;
    };
    tcp_->open_fence(token, for_backend("tcp://"));
    if (shm_)
      shm_->open_fence(token, for_backend("shm://"));
  }

  bool close_fence(uint64_t token) override {
    bool idle = tcp_->close_fence(token);
    if (shm_)
      idle = shm_->close_fence(token) && idle;
    return idle;
  }

  void disconnect(const std::string& endpoint) override {
    for (auto& part : parts_of(endpoint)) {
      if (part.rfind("tcp://", 0) == 0)
        tcp_->disconnect(part);
      else if (part.rfind("shm://", 0) == 0 && shm_)
        shm_->disconnect(part);
    }
  }

 private:
  /// The backend endpoints of a composite endpoint (after its host
  /// identity); a plain endpoint is its own one part.
  static std::vector<std::string> parts_of(const std::string& endpoint) {
    if (endpoint.rfind(scheme, 0) != 0)
      return {endpoint};
    auto parts = split(endpoint.substr(scheme.size()), ';');
    if (!parts.empty())
      parts.erase(parts.begin());
    return parts;
  }

  /// The credential for backend `name` out of "tcp=<c>;shm=<c>" (a plain
  /// credential is taken as it is).
  static std::string part_of(const std::string& credential, const std::string& name) {
    if (credential.find('=') == std::string::npos)
      return credential;
    for (auto& p : split(credential, ';'))
      if (p.rfind(name + "=", 0) == 0)
        return p.substr(name.size() + 1);
    return {};
  }

  struct route {
    transport* via = nullptr;
    peer_id peer = 0;
  };

  // First: the parts below deliver here until they are destroyed.
  completion_relay completions_;
  std::unique_ptr<transport> shm_;  ///< null when it could not start
  std::unique_ptr<transport> tcp_;
  const std::string host_;
  mutable std::mutex mu_;  // guards routes_ and shm_usable_
  std::vector<route> routes_;
  bool shm_usable_ = false;

 public:
  void enable_shm() { shm_usable_ = shm_ != nullptr; }
};

}  // namespace

result<std::unique_ptr<transport>> make_auto_transport(result<std::unique_ptr<transport>> tcp,
                                                       result<std::unique_ptr<transport>> shm) {
  if (!tcp.ok())
    return tcp.error();
  auto t = std::make_unique<auto_transport>(shm.ok() ? std::move(shm).value() : nullptr,
                                            std::move(tcp).value());
  t->enable_shm();
  return std::unique_ptr<transport>{std::move(t)};
}

}  // namespace kvferry::transport::automatic
