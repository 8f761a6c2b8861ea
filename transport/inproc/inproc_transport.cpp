#include "transport/inproc/inproc_transport.hpp"

#include "transport/base/fence_table.hpp"
#include "transport/base/region_table.hpp"
#include "transport/inproc/inproc_options.hpp"

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace kvferry::transport::inproc {

namespace {

constexpr std::string_view scheme = "inproc://";

/// The part of a transport that peers reach: its regions and fences.
struct inproc_node {
  explicit inproc_node(bool trust) : fences(trust) {}
  std::string name;
  region_table regions;
  fence_table fences;
  std::shared_ptr<device_copier> device;  ///< copies where either end is device memory
};

/// Process-wide directory: endpoint name → live node.
class fabric {
 public:
  static fabric& instance() {
    static fabric f;
    return f;
  }

  bool add(const std::shared_ptr<inproc_node>& node) {
    std::lock_guard guard{mu_};
    auto& slot = nodes_[node->name];
    if (!slot.expired())
      return false;
    slot = node;
    return true;
  }

  void remove(const std::string& name) {
    std::lock_guard guard{mu_};
    nodes_.erase(name);
  }

  std::shared_ptr<inproc_node> find(const std::string& name) {
    std::lock_guard guard{mu_};
    auto i = nodes_.find(name);
    return i == nodes_.end() ? nullptr : i->second.lock();
  }

  std::string unique_name() { return "inproc-" + std::to_string(++counter_); }

 private:
  std::mutex mu_;
  std::map<std::string, std::weak_ptr<inproc_node>> nodes_;
  std::atomic<uint64_t> counter_{0};
};

class inproc_transport final : public transport {
 public:
  explicit inproc_transport(std::shared_ptr<inproc_node> node) : node_(std::move(node)) {}

  ~inproc_transport() override { fabric::instance().remove(node_->name); }

  std::string_view name() const override { return "inproc"; }

  caps capabilities() const override { return caps{.ordered_writes = true}; }

  std::string endpoint() const override { return std::string{scheme} + node_->name; }

  using transport::connect;
  using transport::open_fence;
  using transport::register_region;

  result<region_id> register_region(void* base, uint64_t length, memory_kind kind) override {
    if (kind == memory_kind::device && !node_->device)
      return status::invalid_argument("inproc: a region of " + std::to_string(length) +
                                      " B in device memory, and no device copier "
                                      "(options::device) to copy it");
    return node_->regions.add(base, length, kind);
  }

  status deregister_region(region_id id) override { return node_->regions.remove(id); }

  // In one process there is no stranger to keep out: no credential.
  result<peer_id> connect(const std::string& endpoint, const std::string&) override {
    if (endpoint.rfind(scheme, 0) != 0 || endpoint.size() == scheme.size())
      return status::invalid_argument("endpoint '" + endpoint +
                                      "', expected inproc://<name> for the inproc backend");
    std::lock_guard guard{mu_};
    peers_.push_back(endpoint.substr(scheme.size()));
    return static_cast<peer_id>(peers_.size() - 1);
  }

  status post(peer_id peer, write_batch batch) override {
    std::string peer_name;
    completion_handler handler;
    {
      std::lock_guard guard{mu_};
      if (peer >= peers_.size())
        return status::unknown_peer("peer " + std::to_string(peer) + " was never connected (" +
                                    std::to_string(peers_.size()) + " peers)");
      peer_name = peers_[peer];
      handler = handler_;
    }
    auto result = write(peer_name, batch);
    if (handler)
      handler(completion{batch.cookie, std::move(result)});
    return {};
  }

  void set_completion_handler(completion_handler handler) override {
    std::lock_guard guard{mu_};
    handler_ = std::move(handler);
  }

  std::string credential_for(const std::string&) const override { return {}; }

  void open_fence(uint64_t token, grant g) override { node_->fences.open(token, std::move(g)); }

  bool close_fence(uint64_t token) override { return node_->fences.close(token); }

  // Writes are copies by the posting thread: none is ever left half done.
  void disconnect(const std::string&) override {}

 private:
  /// Checks every op first, then copies: a batch with one bad op writes nothing.
  status write(const std::string& peer_name, const write_batch& batch) {
    auto remote = fabric::instance().find(peer_name);
    if (!remote)
      return status::connect_failed("no live inproc endpoint '" + peer_name + "'");
    std::vector<op_span> spans;
    spans.reserve(batch.ops.size());
    for (auto& op : batch.ops)
      spans.push_back({op.remote, op.remote_offset, op.length});
    fence_pass pass{remote->fences, batch.fence, endpoint(), spans};
    if (!pass.admitted())
      return pass.refusal();
    auto local_guard = node_->regions.guard();
    // Writing into our own regions takes one guard only (a shared_mutex must
    // not be locked twice by one thread).
    std::shared_lock<std::shared_mutex> remote_guard;
    if (remote != node_)
      remote_guard = remote->regions.guard();
    const auto& rg = remote == node_ ? local_guard : remote_guard;
    struct copy_job {
      const std::byte* src;
      std::byte* dst;
      bool device;  // either end is device memory: the copier copies
    };
    std::vector<copy_job> copies;
    copies.reserve(batch.ops.size());
    for (auto& op : batch.ops) {
      auto src = node_->regions.resolve(local_guard, op.local, op.local_offset, op.length, "local");
      if (!src.ok())
        return src.error();
      auto dst = remote->regions.resolve(rg, op.remote, op.remote_offset, op.length, "remote");
      if (!dst.ok())
        return dst.error();
      bool device = node_->regions.kind_of(local_guard, op.local) == memory_kind::device ||
                    remote->regions.kind_of(rg, op.remote) == memory_kind::device;
      if (device && !node_->device)
        return status::invalid_argument("inproc: a write into device memory of '" + peer_name +
                                        "', and no device copier here to copy it");
      copies.push_back({*src, *dst, device});
    }
    for (size_t i = 0; i < copies.size(); ++i) {
      auto& c = copies[i];
      if (!c.device) {
        std::memmove(c.dst, c.src, batch.ops[i].length);
      } else if (auto st = node_->device->copy(c.dst, c.src, batch.ops[i].length); !st.ok()) {
        return st;
      }
    }
    return {};
  }

  std::shared_ptr<inproc_node> node_;
  std::mutex mu_;  // guards peers_ and handler_
  std::vector<std::string> peers_;
  completion_handler handler_;
};

}  // namespace

result<std::unique_ptr<transport>> make_inproc_transport(const options& opts) {
  auto node = std::make_shared<inproc_node>(opts.trust_every_peer);
  auto& own = opts.backend<inproc_options>();
  node->name = own.name.empty() ? fabric::instance().unique_name() : own.name;
  node->device = opts.device;
  if (!fabric::instance().add(node))
    return status::invalid_argument("inproc endpoint name '" + node->name +
                                    "' is already taken by a live transport");
  return std::unique_ptr<transport>{std::make_unique<inproc_transport>(std::move(node))};
}

}  // namespace kvferry::transport::inproc
