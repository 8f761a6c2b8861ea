// Region ids: a region is memory a transport registered for local reads and
// remote writes (transport::register_region). How a backend keeps its regions
// is its own affair (transport/base/region_table.hpp).
#pragma once

#include <cstdint>

namespace kvferry::transport {

/// Names a registered region on the transport that registered it. Ids start at
/// 1 and are never reused by the same transport.
using region_id = uint32_t;

}  // namespace kvferry::transport
