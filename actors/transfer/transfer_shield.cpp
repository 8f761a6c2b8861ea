// What a throw inside a transfer actor's handler fails: the rooms it concerns
// (throw_scope.hpp) fail at once, each of their jobs with the chunk_result a
// failed write sends, naming the exception; the actor carries on. The guard
// around the handlers is the one every actor has (actors/base/guard.hpp).
#include <optional>
#include <string>
#include <utility>

#include "actors/base/guard.hpp"
#include "actors/base/log.hpp"
#include "actors/transfer/throw_scope.hpp"
#include "actors/transfer/transfer_steps.hpp"

namespace kvferry::transfer_steps {

namespace {

/// A handler of `now` threw `what`: every job of the rooms it concerns sends
/// its failed result and is forgotten. Their batches still in flight are
/// forgotten too (a late completion is ignored); the rooms are failed, so
/// their source pages may go back once the rank has every result.
failure fail_thrown(self_ptr self, const transfer_state::handling& now, const std::string& what) {
  auto& st = self->state;
  log().error("[{}] exception while handling {}: {}; failing the rooms it concerns",
              to_string(st.self), now.what, what);
  failure why{errc::internal, "exception in the transfer actor: " + what, st.self};
  auto rooms = rooms_hit_by_throw(st.book, st.queue, now.job, now.first_cookie);
  for (auto id : st.book.jobs_of(rooms)) {
    auto r = st.book.at(id).result();
    r.why = why;
    auto to = st.reply_to[id];
    abandon(self, id);
    ++st.counters->chunks;
    self->send(to, std::move(r));
  }
  // No job of these rooms is left to wait for their KV: a count the throw
  // left behind goes.
  st.book.forget_kv(rooms);
  return why;
}

}  // namespace

void handles(self_ptr self, const char* what, std::optional<uint64_t> job) {
  self->state.now = transfer_state::handling{what, job, self->state.book.next()};
}

failure on_exception(self_ptr self, const std::string& what) {
  auto why = fail_thrown(self, std::exchange(self->state.now, {}), what);
  // What the failed jobs held (gather space, a place in a ring's order) may
  // let others go now. A throw here fails what it concerns too; no more is
  // tried until the next message.
  transfer_state::handling behind{"the jobs behind the failed ones", std::nullopt,
                                  self->state.book.next()};
  if (auto again = caught([&] { pump_all(self); }))
    fail_thrown(self, behind, *again);
  return why;
}

}  // namespace kvferry::transfer_steps
