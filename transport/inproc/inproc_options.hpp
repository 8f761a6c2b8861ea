// The inproc backend's own settings (transport/options.hpp carries them:
// `opts.backend<inproc::inproc_options>()`).
#pragma once

#include <string>

namespace kvferry::transport::inproc {

struct inproc_options {
  std::string name;  ///< endpoint name ("inproc://<name>"), empty for a unique one
};

}  // namespace kvferry::transport::inproc
