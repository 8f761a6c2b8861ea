// The reference backend: peers inside one process, a write is a memcpy done by
// the thread that posts, and the completion is delivered before post() returns.
// It performs every check the wire backends perform (unknown region, bounds,
// dead peer), so deterministic actor tests see the same failures.
#pragma once

#include <memory>

#include "transport/transport.hpp"

namespace kvferry::transport::inproc {

/// Creates an inproc transport reachable at "inproc://<opts.name>" (a unique
/// name when empty). A second live transport with the same name is refused.
result<std::unique_ptr<transport>> make_inproc_transport(const options& opts);

}  // namespace kvferry::transport::inproc
