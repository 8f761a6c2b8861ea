#include "apps/launch/status_actor.hpp"

#include <unistd.h>

#include <algorithm>
#include <string>

#include <caf/actor_cast.hpp>
#include <caf/exit_reason.hpp>
#include <caf/system_messages.hpp>

#include "actors/base/log.hpp"
#include "actors/base/sender_check.hpp"
#include "actors/gateway/peer_names.hpp"

namespace kvferry::launch {

namespace {

/// Only the ranks this node hosts are kept: a report for any other place
/// (from a stranger on the status port) is dropped, so the map stays the
/// size of the node.
bool of_this_node(status_state& st, const std::string& instance, uint32_t index) {
  auto key = std::make_pair(instance, index);
  bool ok = st.now.expected.empty()
                ? st.ranks.count(key) != 0 || st.ranks.size() < max_status_ranks
                : std::find(st.now.expected.begin(), st.now.expected.end(),
                            instance + "/" + std::to_string(index)) != st.now.expected.end();
  if (!ok && !st.stranger_told) {
    st.stranger_told = true;
    log().warn("[status {}] dropped a report for {}/{}: not a rank of this node (said once)",
               st.now.node, instance, index);
  }
  return ok;
}

/// Under TLS: true when the message being handled comes from a process that
/// proved this node (its own ranks' processes); else it is dropped.
bool from_this_node(status_actor::stateful_pointer<status_state> self, std::string_view what) {
  if (!self->home_system().has_openssl_manager())
    return true;
  std::string why;
  auto s = self->current_sender();
  if (s && speaks_for(self->home_system(), s->node(), self->state.now.node, why))
    return true;
  drop_stranger(self, "status of node " + self->state.now.node, what);
  return false;
}

/// True when the asker of status_atom may see the rank actors' handles: this
/// process, or under TLS a process that proved this node or kvferry-ctl's
/// identity (CN=ctl) at this process's gateway. Without TLS every asker may
/// (the control plane is unauthenticated there, docs/SECURITY.md §4).
bool may_see_handles(status_actor::stateful_pointer<status_state> self) {
  auto& sys = self->home_system();
  if (!sys.has_openssl_manager())
    return true;
  auto s = self->current_sender();
  if (!s)
    return false;
  if (s->node() == sys.node())
    return true;
  auto name = proven_node_name(s->node());
  return name && (*name == self->state.now.node || *name == ctl_identity);
}

}  // namespace

status_actor::behavior_type node_status_actor(status_actor::stateful_pointer<status_state> self,
                                              std::string node, std::string mode,
                                              std::vector<std::string> expected,
                                              std::string metrics) {
  self->state.now.node = std::move(node);
  self->state.now.pid = static_cast<int32_t>(::getpid());
  self->state.now.mode = std::move(mode);
  self->state.now.expected = std::move(expected);
  self->state.now.metrics = std::move(metrics);
  self->set_down_handler([self](caf::down_msg& m) {
    auto i = self->state.watched.find(m.source);
    if (i == self->state.watched.end())
      return;
    auto& h = self->state.ranks[i->second];
    self->state.watched.erase(i);
    // Late news of an incarnation a newer one replaced, or of one whose
    // process exit (rank_exit, the better reason) came first: nothing new.
    if (caf::actor_cast<caf::actor_addr>(h.last.actor) != m.source || !h.up)
      return;
    h.up = false;
    h.down_reason = m.reason ? self->home_system().render(m.reason) : "exited normally";
  });
  return {
      [self](rank_report& r) {
        if (!of_this_node(self->state, r.instance, r.index) ||
            !from_this_node(self, "a rank_report"))
          return;
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
      [self](rank_exit& e) {
        if (!of_this_node(self->state, e.instance, e.index) || !from_this_node(self, "a rank_exit"))
          return;
        auto& h = self->state.ranks[std::make_pair(e.instance, e.index)];
        if (h.last.instance.empty()) {  // it died before it reported
          h.last.instance = e.instance;
          h.last.index = e.index;
          h.last.pid = e.pid;
        }
        h.restarts = e.restarts;
        h.last_exit = e.reason;
        h.given_up = !e.restarting;
        if (h.last.pid == e.pid) {  // the incarnation it knows of is the one that exited
          h.up = false;
          h.down_reason =
              "process " + e.reason + (e.restarting ? ", restarting" : ", not restarted");
        }
      },
      [self](status_atom) {
        auto out = self->state.now;
        bool handles = may_see_handles(self);
        for (auto& [key, h] : self->state.ranks) {
          out.ranks.push_back(h);
          if (!handles)
            out.ranks.back().last.actor = nullptr;  // its health, not a way to reach it
        }
        if (!handles && !self->state.handles_withheld_told) {
          self->state.handles_withheld_told = true;
          log().info(
              "[status {}] a peer that proved neither this node nor ctl asked for the "
              "status: answered without the ranks' handles (said once)",
              self->state.now.node);
        }
        return out;
      },
  };
}

}  // namespace kvferry::launch
