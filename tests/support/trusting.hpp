// Transport options for tests of the data plane's mechanics (bytes, bounds,
// faults, ordering): receivers that admit any peer, and fence 0 that admits
// any op (options::trust_every_peer). The grant and the credential are
// tested on their own (tests/transport/admission_test.cpp); the runtime
// never trusts.
#pragma once

#include "transport/transport.hpp"

namespace kvferry::test {

inline transport::options trusting(transport::options o = {}) {
  o.trust_every_peer = true;
  return o;
}

}  // namespace kvferry::test
