// Who may tell the decider what (docs/SECURITY.md §2.2): joins and leaves
// only from the registered member at the place they name; finishes from that
// member or the named prefill rank itself; failures from a member or a prefill
// rank a join named. A failure of a live room (its exact key) from a sender no
// join named yet may be a prefill rank whose report overtook the join naming
// it: held, and taken once a join names the sender. Anything else is dropped
// and counted (actors/base/sender_check.hpp). Each check has a test that fails
// without it (tests/actors/sender_check_test.cpp).
#include <caf/actor_cast.hpp>

#include "actors/base/sender_check.hpp"
#include "actors/decision/decider_steps.hpp"

namespace kvferry::decider_steps {

namespace {

/// How many failures from senders not known yet the decider holds at most
/// (the oldest goes first): a stranger's flood costs this much, no more.
constexpr size_t max_held_failures = 256;

caf::actor_addr sender_of(self_ptr self) {
  return caf::actor_cast<caf::actor_addr>(self->current_sender());
}

}  // namespace

bool from_member(self_ptr self, const rank_ref& rank, std::string_view what) {
  auto& m = self->state.members;
  auto i = m.find({rank.tp, rank.pp});
  auto sender = sender_of(self);
  if (i != m.end() && sender && i->second.address() == sender)
    return true;
  drop_stranger(self, who(self), what);
  return false;
}

bool known_participant(self_ptr self, const rank_ref* rank) {
  auto& st = self->state;
  auto sender = sender_of(self);
  if (!sender)
    return false;
  for (auto& [place, handle] : st.members)
    if (handle.address() == sender &&
        (!rank || (rank->tp == place.first && rank->pp == place.second)))
      return true;
  if (rank) {
    auto p = st.prefill.find(*rank);
    return p != st.prefill.end() && p->second.address() == sender;
  }
  for (auto& [r, handle] : st.prefill)
    if (handle.address() == sender)
      return true;
  return false;
}

bool from_participant(self_ptr self, const rank_ref* rank, std::string_view what) {
  if (known_participant(self, rank))
    return true;
  drop_stranger(self, who(self), what);
  return false;
}

void hold_failure(self_ptr self, const room_failure& f) {
  auto& held = self->state.held_failures;
  auto sender = sender_of(self);
  // A reminder of the same report replaces it (a waiting rank says it again).
  for (auto& [from, failure] : held)
    if (from == sender && failure.key == f.key) {
      failure = f;
      return;
    }
  if (held.size() >= max_held_failures)
    held.pop_front();
  held.emplace_back(sender, f);
}

std::optional<failure> take_held_failure(self_ptr self, const caf::actor_addr& sender,
                                         const room_key& key) {
  auto& held = self->state.held_failures;
  for (auto i = held.begin(); i != held.end(); ++i)
    if (i->first == sender && i->second.key == key) {
      auto why = std::move(i->second.why);
      held.erase(i);
      return why;
    }
  return std::nullopt;
}

}  // namespace kvferry::decider_steps
