#include "actors/decision/decider_actor.hpp"

#include <random>

#include <caf/actor_cast.hpp>

#include "actors/log.hpp"

namespace kvferry {

namespace {

using self_ptr = decider_actor::stateful_pointer<decider_state>;

std::string who(self_ptr self) {
  return "[decider " + self->state.book.instance() + "]";
}

/// Sends the verdict to every decode rank that joined the room and every
/// prefill participant.
void broadcast(self_ptr self, const decision_book::room& r, const verdict& v) {
  auto& st = self->state;
  room_verdict msg{r.key, v.outcome, v.why};
  if (v.outcome == kv_poll::failed)
    log().info("{} {}: Failed: {}", who(self), to_string(r.key), to_string(v.why));
  for (auto& d : r.joined)
    if (auto m = st.members.find({d.tp, d.pp}); m != st.members.end())
      self->send(m->second, msg);
  for (auto& p : r.prefill)
    if (auto h = st.prefill.find(p); h != st.prefill.end())
      self->send(h->second, msg);
}

}  // namespace

decider_actor::behavior_type decider(decider_actor::stateful_pointer<decider_state> self,
                                     std::string instance, uint32_t tp_size, uint32_t pp_size,
                                     uint64_t generation) {
  std::random_device rd;
  self->state.book =
      decision_book{std::move(instance), generation, tp_size, pp_size, (uint64_t{rd()} << 32) | 1u};
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    for (auto m = st.members.begin(); m != st.members.end(); ++m) {
      if (m->second.address() != dm.source)
        continue;
      auto gone = st.book.member(m->first.first, m->first.second);
      log().log(
          dm.reason == caf::exit_reason::user_shutdown ? spdlog::level::info : spdlog::level::warn,
          "{} {} went down: {}", who(self), to_string(gone), caf::to_string(dm.reason));
      failure why{errc::peer_down,
                  "decode " + to_string(gone) + " went down (" + caf::to_string(dm.reason) + ")",
                  gone};
      for (auto& key : st.book.rooms_of(gone)) {
        if (auto* r = st.book.find(key))
          if (auto v = st.book.fail(*r, why))
            broadcast(self, *r, *v);
        st.book.leave(key, gone);
      }
      st.members.erase(m);
      return;
    }
  });
  return {
      [self](member_registration& reg) -> caf::result<member_ack> {
        auto& book = self->state.book;
        if (reg.tp_size != book.tp_size() || reg.pp_size != book.pp_size() ||
            reg.rank.tp >= book.tp_size() || reg.rank.pp >= book.pp_size())
          return make_error(
              errc::invalid_argument,
              "decode rank tp" + std::to_string(reg.rank.tp) + " pp" + std::to_string(reg.rank.pp) +
                  " of TP " + std::to_string(reg.tp_size) + " x PP " + std::to_string(reg.pp_size) +
                  " joined decider of instance " + book.instance() + ", which has TP " +
                  std::to_string(book.tp_size()) + " x PP " + std::to_string(book.pp_size()));
        self->monitor(reg.handle);
        self->state.members.insert_or_assign({reg.rank.tp, reg.rank.pp}, reg.handle);
        log().info("{} {} joined", who(self), to_string(book.member(reg.rank.tp, reg.rank.pp)));
        return member_ack{book.instance(), book.instance_generation()};
      },
      [self](room_join& j) {
        auto& st = self->state;
        std::vector<rank_ref> prefill;
        for (auto& p : j.prefill) {
          prefill.push_back(p.rank);
          st.prefill.insert_or_assign(p.rank, p.handle);
        }
        bool known = st.book.find(room_key{j.room, 0}) != nullptr;
        auto before = known ? st.book.find(room_key{j.room, 0})->prefill : std::set<rank_ref>{};
        auto& r = st.book.join(j.room, j.rank, prefill);
        auto joiner = caf::actor_cast<decode_rank_actor>(self->current_sender());
        self->send(joiner, room_keyed{r.key});
        // A room decided before this join: the newcomers learn the verdict now.
        if (auto& v = r.decision.outcome()) {
          room_verdict msg{r.key, v->outcome, v->why};
          self->send(joiner, msg);
          for (auto& p : r.prefill)
            if (!before.count(p))
              if (auto h = st.prefill.find(p); h != st.prefill.end())
                self->send(h->second, msg);
        }
      },
      [self](room_finished& f) {
        auto& book = self->state.book;
        if (auto* r = book.find(f.key))
          if (auto v = book.finish(*r, f.rank))
            broadcast(self, *r, *v);
      },
      [self](room_failure& f) {
        auto& book = self->state.book;
        if (auto* r = book.find(f.key))
          if (auto v = book.fail(*r, std::move(f.why)))
            broadcast(self, *r, *v);
      },
      [self](room_leave& l) { self->state.book.leave(l.key, l.rank); },
  };
}

}  // namespace kvferry
