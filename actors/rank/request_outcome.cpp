#include "actors/rank/request_outcome.hpp"

namespace kvferry {

request_outcome judge_request(const request_facts& f, const room_request& req) {
  using action = request_outcome::action;
  if (f.cleared) {
    // A late request of the cleared room with this id: answered as one that
    // came after the clear; the room opened again waits for its own.
    if (f.cleared->outcome == kv_poll::failed)
      return {action::tell_decider, f.cleared->why};
    return {action::ignore, {}};
  }
  if (f.state == kv_poll::failed)
    // Concluded here already (alone, or by a verdict on a record the decider
    // has since forgotten): the decider hears why, whatever it keys it now.
    return {action::tell_decider, f.concluded_why};
  if (f.room.generation != 0 && f.room.generation != req.key.generation)
    // Another incarnation of the id is live here: refuse the newcomer only.
    return {action::tell_decider,
            failure{errc::duplicate_room,
                    to_string(req.key) + " requested while " + to_string(f.room) + " is live on " +
                        to_string(f.self),
                    f.self}};
  if (is_terminal(f.state))
    return {action::ignore, {}};  // concluded Success before this request
  if (f.instance_down)
    // A rank of this instance is gone: the room cannot be served; the
    // decider decides (and words it) for every rank.
    return {action::report, *f.instance_down};
  if (!f.peer_registered)
    return {action::report,
            failure{errc::invalid_argument,
                    "request for " + to_string(req.key) + " from " + to_string(req.decode_rank) +
                        ", which has not registered its layout with this rank",
                    f.self}};
  return {action::bind, {}};
}

}  // namespace kvferry
