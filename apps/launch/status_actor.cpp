#include "apps/launch/status_actor.hpp"

#include <unistd.h>

#include <caf/actor_cast.hpp>
#include <caf/exit_reason.hpp>
#include <caf/system_messages.hpp>

namespace kvferry::launch {

status_actor::behavior_type node_status_actor(status_actor::stateful_pointer<status_state> self,
                                              std::string node, std::string mode,
                                              std::vector<std::string> expected) {
  self->state.now.node = std::move(node);
  self->state.now.pid = static_cast<int32_t>(::getpid());
  self->state.now.mode = std::move(mode);
  self->state.now.expected = std::move(expected);
  self->set_down_handler([self](caf::down_msg& m) {
    auto i = self->state.watched.find(m.source);
    if (i == self->state.watched.end())
      return;
    auto& h = self->state.ranks[i->second];
    h.up = false;
    h.down_reason = m.reason ? self->home_system().render(m.reason) : "exited normally";
    self->state.watched.erase(i);
  });
  return {
      [self](rank_report& r) {
        auto key = std::make_pair(r.instance, r.index);
        auto& h = self->state.ranks[key];
        bool fresh_actor = r.actor && (!h.last.actor || h.last.actor != r.actor);
        h.last = std::move(r);
        if (fresh_actor) {
          // A new incarnation of the rank: up again, watched.
          h.up = true;
          h.down_reason.clear();
          auto addr = caf::actor_cast<caf::actor_addr>(h.last.actor);
          self->state.watched[addr] = key;
          self->monitor(h.last.actor);
        }
      },
      [self](status_atom) {
        auto out = self->state.now;
        for (auto& [key, h] : self->state.ranks)
          out.ranks.push_back(h);
        return out;
      },
  };
}

}  // namespace kvferry::launch
