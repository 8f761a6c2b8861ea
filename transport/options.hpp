// What a backend is made with (registry.hpp's make_transport): the settings
// every backend understands, and each backend's own settings, found by their
// type. A backend declares its struct in its folder (tcp/tcp_options.hpp,
// verbs/verbs_options.hpp, inproc/inproc_options.hpp), so adding a backend or
// a setting edits no shared header; whoever knows a backend sets its struct,
// and every other backend ignores it.
//
//   transport::options o;
//   o.listen_host = "10.0.0.7";                 // every backend that listens
//   o.backend<tcp::tcp_options>().streams = 8;  // tcp only
#pragma once

#include <any>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <typeindex>
#include <typeinfo>

#include "transport/device_memory.hpp"

namespace kvferry::transport {

/// Options every backend understands (each uses what applies to it), and the
/// backends' own settings. Copies copy every backend's settings.
struct options {
  /// Where the receiver listens, for backends that listen on a network
  /// address (tcp, verbs' side channel): the address it binds...
  std::string listen_host = "127.0.0.1";
  /// ...and its port, 0 for any free one.
  uint16_t listen_port = 0;
  /// tcp, shm, inproc: how device regions are read and written (pinned
  /// bounce pieces, CUDA IPC); without one, registering device memory fails.
  std::shared_ptr<device_copier> device;
  /// Tests of transport mechanics only: receivers admit any peer without a
  /// credential, and fence 0 (or one opened without a grant) admits any op.
  /// Never set by the runtime (transport/base/fence_table.hpp,
  /// transport/base/peer_auth.hpp).
  bool trust_every_peer = false;

  /// The settings of the backend whose struct is `Settings`, to change them:
  /// added with their defaults on first use.
  template <class Settings>
  Settings& backend() {
    auto& slot = backends_[std::type_index{typeid(Settings)}];
    if (!slot.has_value())
      slot = Settings{};
    return std::any_cast<Settings&>(slot);
  }

  /// The settings of the backend whose struct is `Settings`: those set, or
  /// its defaults. What a backend reads when it is made.
  template <class Settings>
  const Settings& backend() const {
    static const Settings defaults{};
    auto found = backends_.find(std::type_index{typeid(Settings)});
    return found == backends_.end() ? defaults : std::any_cast<const Settings&>(found->second);
  }

 private:
  std::map<std::type_index, std::any> backends_;  ///< one Settings per backend that was set
};

}  // namespace kvferry::transport
