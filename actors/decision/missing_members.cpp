#include "actors/decision/missing_members.hpp"

#include "messages/wall_clock.hpp"

namespace kvferry {

failure instance_incomplete(const rank_ref& gone, const std::string& how, int64_t at_ns) {
  return failure{errc::instance_incomplete,
                 "decode instance " + gone.instance + " is incomplete: " + to_string(gone) + " " +
                     how + " at " + utc_time(at_ns) + "; its rooms fail until it is back",
                 gone};
}

}  // namespace kvferry
