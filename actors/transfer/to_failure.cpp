#include "actors/transfer/to_failure.hpp"

#include <string>

namespace kvferry {

failure to_failure(const transport::status& st, std::string_view backend, const rank_ref& peer,
                   const rank_ref& origin) {
  using transport::code;
  errc c;
  switch (st.error_code()) {
    case code::out_of_bounds:
      c = errc::out_of_bounds;
      break;
    case code::connect_failed:
      c = errc::connect_failed;
      break;
    // The link, not the room: the failure keeps the peer's scope.
    case code::connection_lost:
    case code::protocol_error:
      c = errc::link_lost;
      break;
    default:
      c = errc::transfer_failed;
  }
  auto cause = std::string{backend} + " write to " + to_string(peer) + " failed: " + st.to_string();
  return failure{c, std::move(cause), origin};
}

}  // namespace kvferry
