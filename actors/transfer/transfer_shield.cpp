// What a throw inside a transfer actor's handler fails: the rooms it concerns
// (throw_scope.hpp) fail at once, each of their jobs with the chunk_result a
// failed write sends, naming the exception; the actor carries on.
#include <exception>
#include <optional>
#include <set>
#include <string>

#include "actors/guard.hpp"
#include "actors/log.hpp"
#include "actors/transfer/throw_scope.hpp"
#include "actors/transfer/transfer_steps.hpp"

namespace kvferry::transfer_steps {

namespace {

/// What `f` threw, as text; nothing if it returned.
template <class F>
std::optional<std::string> caught(F&& f) {
  try {
    f();
    return std::nullopt;
  } catch (const std::exception& e) {
    return std::string{e.what()};
  } catch (...) {
    return std::string{"an exception of unknown type"};
  }
}

/// A handler threw while handling `handling` (and job `job`, if it handles
/// one): every job of the rooms it concerns sends its failed result and is
/// forgotten. Their batches still in flight are forgotten too (a late
/// completion is ignored); the rooms are failed, so their source pages may go
/// back once the rank has every result.
void fail_thrown(self_ptr self, const char* handling, std::optional<uint64_t> job,
                 uint64_t first_cookie, const std::string& what) {
  auto& st = self->state;
  log().error("[{}] exception while handling {}: {}; failing the rooms it concerns",
              to_string(st.self), handling, what);
  failure why{errc::internal, "exception in the transfer actor: " + what, st.self};
  auto rooms = rooms_hit_by_throw(st.book, st.queue, job, first_cookie);
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
}

}  // namespace

void shielded(self_ptr self, const char* handling, std::optional<uint64_t> job,
              const std::function<void()>& f) {
  auto first_cookie = self->state.book.next();
  auto what = caught([&] {
    fire_planted_fault();
    f();
  });
  if (!what)
    return;
  fail_thrown(self, handling, job, first_cookie, *what);
  // What the failed jobs held (gather space, a place in a ring's order) may
  // let others go now. A throw here fails what it concerns too; no more is
  // tried until the next message.
  first_cookie = self->state.book.next();
  if (auto again = caught([&] { pump_all(self); }))
    fail_thrown(self, "the jobs behind the failed ones", std::nullopt, first_cookie, *again);
}

}  // namespace kvferry::transfer_steps
