// The one place where the data plane's status becomes a room failure.
#pragma once

#include <string_view>

#include "messages/failure.hpp"
#include "transport/status.hpp"

namespace kvferry {

/// A failed write of a room: out_of_bounds stays out_of_bounds; the link's
/// failures keep the peer's scope (a connect failure is connect_failed, a
/// dropped connection or a peer that spoke something else link_lost);
/// everything else is transfer_failed. The cause names the backend, the peer
/// rank and the transport's own words.
failure to_failure(const transport::status& st, std::string_view backend, const rank_ref& peer,
                   const rank_ref& origin);

}  // namespace kvferry
