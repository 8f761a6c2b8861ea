// The verbs backend's own settings (transport/options.hpp carries them:
// `opts.backend<verbs::verbs_options>()`). Where its side channel listens is
// the shared options::listen_host and listen_port.
#pragma once

#include <cstdint>
#include <string>

namespace kvferry::transport::verbs {

struct verbs_options {
  std::string device;  ///< RDMA device name, empty for the first one found
  uint8_t port = 1;    ///< port of that device
  int gid_index = 0;   ///< GID index (RoCE needs a valid one), -1: LID only
};

}  // namespace kvferry::transport::verbs
