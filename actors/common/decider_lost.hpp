// The one cause every rank and the decider conclude with when a room's ranks
// and its decider lost contact, whichever side found out and however.
#pragma once

#include <string>

#include "messages/failure.hpp"
#include "messages/handles.hpp"

namespace kvferry {

/// The decider of decode instance `instance`, as the origin of the failures
/// it causes by its absence. No generation: a rank that never registered does
/// not know it, and every rank must word the failure the same.
inline rank_ref decider_ref(const std::string& instance) {
  return instance_ref(role::decode, instance, 0);
}

/// The failure every rank concludes with when it and `decider` lost contact:
/// the decider went down, fell silent for longer than allowed, or never
/// answered; or the decider lost a rank of the room by its connection. One
/// wording whatever the side and the way it found out (the logs say which):
/// across a cut link neither side can tell the other what it saw, so ranks
/// that found out differently, on both sides of the cut, still agree.
inline failure decider_lost(const rank_ref& decider) {
  return failure{
      errc::peer_down,
      "contact was lost between the decider of " + decider.instance + " and a rank of the room",
      decider};
}

/// Stands for a decider that is not watched (no live room named it).
inline rank_ref unknown_decider() {
  return decider_ref("an unknown decode instance");
}

}  // namespace kvferry
