// The notice a life watch gives an actor: when the holder of a watched life
// token ends, the actor gets life_ended (messages/life.hpp) from the watch's
// thread, if it still lives. One way for every actor that watches tokens
// (the bootstrap, the decider).
#pragma once

#include <caf/actor_cast.hpp>
#include <caf/send.hpp>
#include <caf/weak_intrusive_ptr.hpp>

#include "actors/process/life_token.hpp"
#include "messages/life.hpp"

namespace kvferry {

/// Watches `life` in `lives`; its holder's end reaches `self` (of handle
/// type `Handle`) as life_ended. True when it is watched (a token of this
/// host that could be opened).
template <class Handle, class Self>
bool watch_life_for(life_watch& lives, Self* self, const life_token_ref& life) {
  if (life.empty())
    return false;
  caf::weak_actor_ptr weak = self->ctrl();
  return lives.watch(life, [weak, name = life.name](bool died) {
    if (auto strong = weak.lock())
      caf::anon_send(caf::actor_cast<Handle>(strong), life_ended{name, died});
  });
}

}  // namespace kvferry
