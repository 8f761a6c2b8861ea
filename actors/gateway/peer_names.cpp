#include "actors/gateway/peer_names.hpp"

#include <deque>
#include <map>
#include <mutex>

namespace kvferry {

namespace {

struct proven {
  std::mutex mu;
  std::map<caf::node_id, std::string> names;
  std::deque<caf::node_id> order;  // oldest first
  std::string own;
};

proven& book() {
  static proven p;
  return p;
}

}  // namespace

void remember_node_name(const caf::node_id& node, const std::string& name) {
  auto& b = book();
  std::lock_guard<std::mutex> guard{b.mu};
  auto [i, fresh] = b.names.insert_or_assign(node, name);
  if (!fresh)
    return;
  b.order.push_back(node);
  while (b.order.size() > max_proven_peers) {
    b.names.erase(b.order.front());
    b.order.pop_front();
  }
}

std::optional<std::string> proven_node_name(const caf::node_id& node) {
  auto& b = book();
  std::lock_guard<std::mutex> guard{b.mu};
  if (auto i = b.names.find(node); i != b.names.end())
    return i->second;
  return std::nullopt;
}

void set_own_node_name(const std::string& name) {
  auto& b = book();
  std::lock_guard<std::mutex> guard{b.mu};
  b.own = name;
}

bool speaks_for(caf::actor_system& sys, const caf::node_id& sender, const std::string& expected,
                std::string& why) {
  if (expected.empty() || !sys.has_openssl_manager())
    return true;
  std::optional<std::string> name;
  if (sender == sys.node()) {
    auto& b = book();
    std::lock_guard<std::mutex> guard{b.mu};
    name = b.own;
  } else {
    name = proven_node_name(sender);
  }
  if (name && *name == expected)
    return true;
  why = name ? "its certificate is node \"" + *name + "\"'s; expected node \"" + expected + "\""
             : "it proved no node at this process's gateway; expected node \"" + expected + "\"";
  return false;
}

}  // namespace kvferry
