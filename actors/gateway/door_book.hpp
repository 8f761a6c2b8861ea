// The plain bookkeeping of a process's gateway (gateway_actor.hpp): what this
// process published on which port, which remote gateway serves which
// host:port, and the lookups that wait while a connection to their host is
// being made. Knows nothing of CAF: Door is the remote gateway's handle,
// Waiter whatever answers a lookup.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace kvferry {

template <class Published, class Door, class Waiter>
class door_book {
 public:
  /// Lookups waiting at most per host; past it a new one is refused.
  static constexpr size_t max_waiting_per_host = 4096;

  // -- this process's ports -----------------------------------------------------

  bool publishes(uint16_t port) const { return mine_.count(port) != 0; }
  void publish(uint16_t port, Published what) { mine_[port] = std::move(what); }
  void unpublish(uint16_t port) { mine_.erase(port); }
  const Published* published_on(uint16_t port) const {
    auto i = mine_.find(port);
    return i == mine_.end() ? nullptr : &i->second;
  }
  std::vector<uint16_t> ports() const {
    std::vector<uint16_t> out;
    for (auto& [port, what] : mine_)
      out.push_back(port);
    return out;
  }

  // -- remote gateways ----------------------------------------------------------

  /// The remote gateway known to serve host:port, if any.
  std::optional<Door> door_at(const std::string& host, uint16_t port) const {
    auto i = doors_.find(key(host, port));
    if (i == doors_.end())
      return std::nullopt;
    return i->second;
  }
  /// `door` serves every port in `ports` of `host`.
  void learn(const std::string& host, const std::vector<uint16_t>& ports, const Door& door) {
    for (auto p : ports)
      doors_[key(host, p)] = door;
  }
  /// `door` is gone: forgets every host:port it served.
  void forget(const Door& door) {
    for (auto i = doors_.begin(); i != doors_.end();)
      i = i->second == door ? doors_.erase(i) : std::next(i);
  }

  // -- one connection at a time per host ------------------------------------------

  /// True when a connection to `host` is being made (a lookup then waits).
  bool connecting(const std::string& host) const { return connecting_.count(host) != 0; }
  void start_connecting(const std::string& host) { connecting_.insert(host); }
  void done_connecting(const std::string& host) { connecting_.erase(host); }

  /// Queues a lookup of host:port; false when the host's queue is full.
  bool wait(const std::string& host, uint16_t port, Waiter w) {
    auto& q = waiting_[host];
    if (q.size() >= max_waiting_per_host)
      return false;
    q.push_back({port, std::move(w)});
    return true;
  }
  /// The next waiting lookup of `host`, if any.
  std::optional<std::pair<uint16_t, Waiter>> next_waiting(const std::string& host) {
    auto i = waiting_.find(host);
    if (i == waiting_.end())
      return std::nullopt;
    auto front = std::move(i->second.front());
    i->second.pop_front();
    if (i->second.empty())
      waiting_.erase(i);
    return front;
  }

 private:
  static std::string key(const std::string& host, uint16_t port) {
    return host + ":" + std::to_string(port);
  }

  std::map<uint16_t, Published> mine_;
  std::map<std::string, Door> doors_;
  std::set<std::string> connecting_;
  std::map<std::string, std::deque<std::pair<uint16_t, Waiter>>> waiting_;
};

}  // namespace kvferry
