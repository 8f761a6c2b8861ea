// The decider actor's rooms: decode ranks register as members, their joins
// key each room and name its prefill side, finishes and failures come in,
// and the verdict goes out to everyone. The decision itself is plain logic
// (decision_book); its peers and heartbeats are decider_peers.cpp's.
#include "actors/decision/decider_actor.hpp"

#include <algorithm>
#include <random>
#include <set>

#include <caf/actor_cast.hpp>

#include "actors/base/log.hpp"
#include "actors/common/deadline_timer.hpp"
#include "actors/common/decider_lost.hpp"
#include "actors/decision/decider_steps.hpp"
#include "actors/decision/join_effects.hpp"
#include "actors/gateway/peer_names.hpp"
#include "actors/process/life_notice.hpp"

namespace kvferry {

namespace decider_steps {

namespace {

/// The decider's word on a room (its key, its verdict) goes out urgent, as
/// the heartbeats do: a rank behind a backlog of room traffic reads it before
/// its own check of this decider's silence could give the room up (the
/// lease, decider_peers.cpp), and a key never trails its verdict.
template <class Handle, class Message>
void tell(self_ptr self, const Handle& to, Message&& msg) {
  self->template send<caf::message_priority::high>(to, std::forward<Message>(msg));
}

/// The verdict of decided room `r` to the rank whose message is being
/// handled (a member, or a prefill participant: the only senders the
/// handlers admit), unless the broadcast reached it already (a joined
/// member, a named prefill participant: their report crossed the verdict)
/// or `again` (a reminder: the verdict it got was lost on the way).
void tell_sender(self_ptr self, const decision_book::room& r, bool again = false) {
  auto& st = self->state;
  auto& d = *r.decision.outcome();
  room_verdict v{r.key, d.outcome, d.why};
  auto sender = caf::actor_cast<caf::actor_addr>(self->current_sender());
  for (auto& [place, handle] : st.members)
    if (handle.address() == sender) {
      if (again || !r.joined.count(st.book.member(place.first, place.second)))
        tell(self, handle, v);
      return;
    }
  if (!again)
    for (auto& p : r.prefill)
      if (auto h = st.prefill.find(p); h != st.prefill.end() && h->second.address() == sender)
        return;
  tell(self, caf::actor_cast<prefill_rank_actor>(self->current_sender()), v);
}

/// Watches the life token of member (tp, pp) when its process is another
/// on this host: its death is known before its connection drops.
void watch_life(self_ptr self, std::pair<uint32_t, uint32_t> place, const life_token_ref& life) {
  auto& st = self->state;
  if (auto l = st.member_life.find(place); l != st.member_life.end()) {
    st.lives.forget(l->second);  // the incarnation it replaces
    st.member_life.erase(l);
  }
  if (watch_life_for<decider_actor>(st.lives, self, life))
    st.member_life[place] = life.name;
}

/// A decode rank of this instance registers as a member.
caf::result<member_ack> on_register(self_ptr self, member_registration& reg) {
  auto& book = self->state.book;
  std::string why;
  if (auto s = self->current_sender();
      !s || !speaks_for(self->home_system(), s->node(), self->state.node, why)) {
    auto what = who(self) + " refused the registration of decode rank tp" +
                std::to_string(reg.rank.tp) + " pp" + std::to_string(reg.rank.pp) + ": " + why;
    log().warn("{}", what);
    return make_error(errc::invalid_argument, what);
  }
  if (reg.tp_size != book.tp_size() || reg.pp_size != book.pp_size() ||
      reg.rank.tp >= book.tp_size() || reg.rank.pp >= book.pp_size())
    return make_error(errc::invalid_argument,
                      "decode rank tp" + std::to_string(reg.rank.tp) + " pp" +
                          std::to_string(reg.rank.pp) + " of TP " + std::to_string(reg.tp_size) +
                          " x PP " + std::to_string(reg.pp_size) + " joined decider of instance " +
                          book.instance() + ", which has TP " + std::to_string(book.tp_size()) +
                          " x PP " + std::to_string(book.pp_size()));
  self->monitor(reg.handle);
  self->state.members.insert_or_assign({reg.rank.tp, reg.rank.pp}, reg.handle);
  watch_life(self, {reg.rank.tp, reg.rank.pp}, reg.life);
  if (self->state.missing.back(book.member(reg.rank.tp, reg.rank.pp)))
    log().info("{} {} is back: the instance takes rooms again{}", who(self),
               to_string(book.member(reg.rank.tp, reg.rank.pp)),
               self->state.missing.empty() ? "" : " once every missing member is");
  // It hears from this decider now: the start of its lease.
  auto& at = self->state.answered_at[book.member(reg.rank.tp, reg.rank.pp)];
  at = std::max(at, self->clock().now());
  arm_heartbeat(self);
  log().info("{} {} joined", who(self), to_string(book.member(reg.rank.tp, reg.rank.pp)));
  return member_ack{book.instance(), book.instance_generation()};
}

/// A join for a room decided and forgotten before this member came: it
/// learns how the room ended, under the key everyone else concluded with
/// (and so do the prefill ranks it names). False when the book has no such
/// tombstone.
bool answer_late_join(self_ptr self, const room_join& j, const decode_rank_actor& joiner) {
  auto* t = self->state.book.late_join(j.room, j.rank);
  if (!t)
    return false;
  room_verdict v{t->key, t->outcome.outcome, t->outcome.why};
  tell(self, joiner, room_keyed{t->key});
  tell(self, joiner, v);
  for (auto& p : j.prefill)
    tell(self, p.handle, v);
  return true;
}

/// The prefill ranks a join names, watched as the members are (a kill is
/// known when its connection drops); a new incarnation of one starts alive.
std::vector<rank_ref> note_prefill_ranks(self_ptr self, const room_join& j) {
  auto& st = self->state;
  std::vector<rank_ref> out;
  for (auto& p : j.prefill) {
    out.push_back(p.rank);
    if (auto h = st.prefill.find(p.rank); h == st.prefill.end() || h->second != p.handle) {
      self->monitor(p.handle);
      st.beats.answered(p.rank);
    }
    if (auto l = st.lost_prefill.find(p.rank);
        l != st.lost_prefill.end() && l->second.handle != p.handle)
      st.lost_prefill.erase(l);
    st.prefill.insert_or_assign(p.rank, p.handle);
  }
  return out;
}

/// The cause `effects` names for room `r`; for an earlier report, every one
/// the join's prefill ranks left for the room is taken (the first counts).
std::optional<failure> cause_of(self_ptr self, const join_effects& effects, decision_book::room& r,
                                const room_join& j, const std::vector<rank_ref>& prefill) {
  auto& st = self->state;
  switch (effects.fail_with) {
    case join_failure::none:
      return std::nullopt;
    case join_failure::overloaded:
      if (st.figures)
        st.figures->refused();
      return failure{errc::overloaded,
                     "the decider of " + st.book.instance() + " holds " +
                         std::to_string(st.limits.max_rooms) +
                         " undecided rooms, its limit (kvferry.max-rooms): " + to_string(r.key) +
                         " is refused",
                     decider_ref(st.book.instance())};
    case join_failure::member_missing:
      return *st.missing.cause();
    case join_failure::prefill_lost:
      for (auto& p : prefill)
        if (auto l = st.lost_prefill.find(p); l != st.lost_prefill.end())
          return l->second.why;
      return std::nullopt;
    case join_failure::reported_before: {
      std::optional<failure> first;
      for (auto& p : j.prefill)
        if (auto why = take_held_failure(self, p.handle.address(), r.key); why && !first)
          first = std::move(why);
      return first;
    }
  }
  return std::nullopt;
}

/// A member joins a room: the room is keyed (and named its prefill side);
/// judge_join (join_effects.hpp) says whether the join fails it at once.
void on_join(self_ptr self, room_join& j) {
  if (!from_member(self, j.rank, "a room_join"))
    return;
  auto& st = self->state;
  auto joiner = caf::actor_cast<decode_rank_actor>(self->current_sender());
  if (!st.book.find(room_key{j.room, 0}) && answer_late_join(self, j, joiner))
    return;
  auto prefill = note_prefill_ranks(self, j);
  auto* known = st.book.find(room_key{j.room, 0});
  auto before = known ? known->prefill : std::set<rank_ref>{};
  join_facts facts;
  facts.new_room = known == nullptr;
  facts.at_admission_limit = st.book.undecided_count() >= st.limits.max_rooms;
  auto& r = st.book.join(j.room, j.rank, prefill, self->clock().now());
  // A member declared lost that joins a room is alive again.
  auto member = st.book.member(j.rank.tp, j.rank.pp);
  if (st.beats.lost(member)) {
    st.beats.answered(member);
    st.missing.back(member);
  }
  facts.decided = r.decision.decided();
  facts.member_missing = st.missing.cause() != nullptr;
  facts.prefill_lost = std::any_of(prefill.begin(), prefill.end(),
                                   [&](auto& p) { return st.lost_prefill.count(p) > 0; });
  facts.reported_before =
      std::any_of(st.held_failures.begin(), st.held_failures.end(), [&](auto& h) {
        return h.second.key == r.key &&
               std::any_of(j.prefill.begin(), j.prefill.end(),
                           [&](auto& p) { return p.handle.address() == h.first; });
      });
  auto effects = judge_join(facts);
  if (effects.fail_with != join_failure::none && !(effects.lease_first && lapsed(self, r)))
    if (auto why = cause_of(self, effects, r, j, prefill))
      if (auto v = st.book.fail(r, std::move(*why)))
        broadcast(self, r, *v);
  if (!r.decision.decided())
    arm_heartbeat(self);
  tell(self, joiner, room_keyed{r.key});
  // A room decided before this join: the newcomers learn the verdict now.
  if (auto& v = r.decision.outcome()) {
    room_verdict msg{r.key, v->outcome, v->why};
    tell(self, joiner, msg);
    for (auto& p : r.prefill)
      if (!before.count(p))
        if (auto h = st.prefill.find(p); h != st.prefill.end())
          tell(self, h->second, msg);
  }
}

/// A participant finished its part of a room.
void on_finished(self_ptr self, room_finished& f) {
  auto& book = self->state.book;
  // The room's exact key (its generation is drawn at random) also
  // admits a prefill rank of the room whose join has not come in yet:
  // its finish and the join travel on different connections.
  auto* keyed = f.key.generation != 0 ? book.find(f.key) : nullptr;
  if (!keyed && book.decided_before(f.key))
    return;  // a room decided and forgotten: late news, not a stranger's
  if (!from_participant(self, &f.rank, "a room_finished"))
    return;
  auto* r = book.find(f.key);
  if (r && r->decision.decided()) {
    // A reminder from a rank that still waits: its verdict was lost on
    // the way (a route being set up); it hears it again.
    tell_sender(self, *r, true);
    return;
  }
  if (r && !lapsed(self, *r))
    if (auto v = book.finish(*r, f.rank))
      broadcast(self, *r, *v);
}

/// A participant reports a room's failure: the first cause wins.
void on_failure(self_ptr self, room_failure& f) {
  // As for room_finished: the exact key admits a failure that overtook
  // the join naming its rank.
  if (!self->state.book.find(f.key) && self->state.book.decided_before(f.key))
    return;  // a room decided and forgotten: late news, not a stranger's
  if (f.key.generation != 0 && self->state.book.find(f.key) && !known_participant(self)) {
    // A live room's exact key from a sender not known yet: a prefill rank
    // whose failure overtook the join naming it (they travel on different
    // connections), or a stranger. Held, not taken: it counts once a join
    // names the sender (on_join), and is forgotten otherwise.
    hold_failure(self, f);
    return;
  }
  if (!from_participant(self, nullptr, "a room_failure"))
    return;
  auto& st = self->state;
  auto* r = st.book.find(f.key);
  auto sender = caf::actor_cast<caf::actor_addr>(self->current_sender());
  if (!r && f.key.generation == 0) {
    for (auto& [place, handle] : st.members) {
      if (handle.address() != sender)
        continue;
      auto who = st.book.member(place.first, place.second);
      if (auto* t = st.book.late_join(f.key.room, who)) {
        // Decided and forgotten before this member's word came: it learns
        // how the room ended, as a late join does.
        tell(self, handle, room_keyed{t->key});
        tell(self, handle, room_verdict{t->key, t->outcome.outcome, t->outcome.why});
        return;
      }
      // A member that concluded a room alone (this decider was silent
      // for it) before its join got here: the room starts with that
      // cause, so that the members that join later conclude the same.
      r = &st.book.join(f.key.room, who, {}, self->clock().now());
      break;
    }
  }
  if (r && r->decision.decided()) {
    // Decided already: a reporter the verdict did not reach (it reported
    // before its join was keyed) still waits for the word everyone else
    // concluded with. It hears it now.
    tell_sender(self, *r);
    return;
  }
  if (r && !lapsed(self, *r))
    if (auto v = st.book.fail(*r, std::move(f.why)))
      broadcast(self, *r, *v);
}

/// A member cleared a room.
void on_leave(self_ptr self, room_leave& l) {
  if (!from_member(self, l.rank, "a room_leave"))
    return;
  if (self->state.book.leave(l.key, l.rank, live_members(self)))
    forget_unnamed_prefill(self);
}

/// Decided rooms waited long enough for members that never joined.
void on_expire(self_ptr self) {
  auto& book = self->state.book;
  auto fired = book.expiries_due(self->clock().now());
  set_timer(self, fired.set_timer, expire_atom_v);
  for (auto& d : fired.due_now) {
    room_key key{d.room, d.tag};
    if (!book.find(key))
      continue;
    book.excuse_late(key);
    if (book.forget_if_done(d.room, live_members(self)))
      forget_unnamed_prefill(self);
  }
}

}  // namespace

std::string who(self_ptr self) {
  return "[decider " + self->state.book.instance() + "]";
}

/// Sends the verdict to every decode rank that joined the room and every
/// prefill participant.
void broadcast(self_ptr self, const decision_book::room& r, const verdict& v) {
  auto& st = self->state;
  room_verdict msg{r.key, v.outcome, v.why};
  // Kept until every member released it; a member that never joins is waited
  // for as long as a room may stay in Bootstrapping.
  set_timer(self, st.book.arm_expiry(r.key, self->clock().now() + st.limits.bootstrapping),
            expire_atom_v);
  if (v.outcome == kv_poll::failed)
    log().info("{} {}: Failed: {}", who(self), to_string(r.key), to_string(v.why));
  if (st.figures && r.opened != std::chrono::steady_clock::time_point{})
    st.figures->verdict(v.outcome, std::chrono::steady_clock::now() - r.opened);
  for (auto& d : r.joined)
    if (auto m = st.members.find({d.tp, d.pp}); m != st.members.end())
      tell(self, m->second, msg);
  for (auto& p : r.prefill)
    if (auto h = st.prefill.find(p); h != st.prefill.end())
      tell(self, h->second, msg);
}

/// The decode ranks registered now, as the book names them.
std::set<rank_ref> live_members(self_ptr self) {
  std::set<rank_ref> out;
  for (auto& [place, handle] : self->state.members)
    out.insert(self->state.book.member(place.first, place.second));
  return out;
}

/// Drops the handles of prefill ranks that no room on record names any more.
void forget_unnamed_prefill(self_ptr self) {
  auto& st = self->state;
  std::erase_if(st.prefill, [&](auto& kv) {
    if (st.book.rooms_naming(kv.first) > 0)
      return false;
    self->demonitor(kv.second.address());
    return true;
  });
}

/// An exception escaped a handler: every undecided room fails with it, and
/// the decider carries on. The decider is no rank: its failures name it the
/// way the ranks do when it is lost (decider_ref, the decode instance).
failure on_exception(self_ptr self, const std::string& what) {
  auto& st = self->state;
  log().error("{} exception in a handler: {}; failing its undecided rooms", who(self), what);
  failure why{errc::internal, "exception in the decider of " + st.book.instance() + ": " + what,
              decider_ref(st.book.instance())};
  for (auto& key : st.book.undecided())
    if (auto* r = st.book.find(key))
      if (auto v = st.book.fail(*r, why))
        broadcast(self, *r, *v);
  return why;
}

}  // namespace decider_steps

decider_actor::behavior_type decider(decider_actor::stateful_pointer<decider_state> self,
                                     std::string instance, uint32_t tp_size, uint32_t pp_size,
                                     uint64_t generation, deadlines limits) {
  return decider_on(self, std::move(instance), tp_size, pp_size, generation, limits, {}, nullptr);
}

decider_actor::behavior_type decider_on(decider_actor::stateful_pointer<decider_state> self,
                                        std::string instance, uint32_t tp_size, uint32_t pp_size,
                                        uint64_t generation, deadlines limits, std::string node,
                                        std::shared_ptr<metrics::registry> metrics) {
  self->state.node = std::move(node);
  if (metrics)
    self->state.figures = std::make_shared<metrics::decider_figures>(std::move(metrics), instance);
  std::random_device rd;
  self->state.limits = limits;
  self->state.beats = liveness<rank_ref>{limits.heartbeat_misses};
  self->state.book =
      decision_book{std::move(instance), generation, tp_size, pp_size, (uint64_t{rd()} << 32) | 1u};
  using namespace decider_steps;
  self->set_down_handler(
      guard(self, on_exception, [self](caf::down_msg& dm) { on_down(self, dm); }));
  return guarded<decider_actor::behavior_type>(
      self, on_exception,
      [self](member_registration& reg) -> caf::result<member_ack> {
        return on_register(self, reg);
      },
      [self](room_join& j) { on_join(self, j); },
      [self](room_finished& f) { on_finished(self, f); },
      [self](room_failure& f) { on_failure(self, f); },
      [self](reach_peers& ask) -> caf::result<reach_peers> { return reach(self, ask); },
      [self](room_leave& l) { on_leave(self, l); }, [self](expire_atom) { on_expire(self); },
      [self](heartbeat_tick_atom) { heartbeat_round(self); },
      [self](life_ended& e) { on_life_ended(self, e); });
}

}  // namespace kvferry
