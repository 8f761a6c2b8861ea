// The one guard around an actor's handlers. CAF 0.17 terminates an actor on
// any exception that escapes a handler, whatever its exception handler
// returns; a rank actor that died that way would leave the states its
// scheduler polls behind. So every handler and every response callback of
// the rank actors, the decider, the bootstrap, the staging actor and the
// transfer actor runs inside guard(): an exception is handed to the actor's
// `on_exception(self, what)` (which fails the rooms it concerns with the
// cause, so that the verdict names it), a request gets an error back, and the
// actor carries on.
//
// `on_exception` returns the `failure` it made of the exception (naming the
// actor): a request whose handler threw gets that failure as its error, so
// that the asker can fail its rooms with the same cause.
//
// The seam: a guarded actor's state may have a `before_handler` hook, run
// first inside the guard of every handler. Empty unless the actor's owner sets it;
// what it throws is handled as the handler's own exception. Tests plant a
// fault with it at the message they choose (a bug in a handler, reproduced),
// the way leveldb's tests wrap its Env; instrumentation may count handlers.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include <caf/error.hpp>
#include <caf/make_message.hpp>
#include <caf/result.hpp>

#include "messages/failure.hpp"

namespace kvferry {

/// Run first inside the guard of each handler of an actor (see above).
using handler_hook = std::function<void()>;

/// Messages (handlers and response callbacks) the guarded actors of this
/// process have run so far: what `kvferry-bench rooms` divides by its rooms.
/// One relaxed increment per message; published on purpose, read by anyone.
inline std::atomic<uint64_t>& messages_handled() {
  static std::atomic<uint64_t> count{0};
  return count;
}

/// What `f()` threw, as text; nothing if it returned.
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

namespace detail {

template <class R>
struct guard_fallback {
  static R make(caf::error err) { return R{std::move(err)}; }
};

template <>
struct guard_fallback<void> {
  static void make(caf::error) {}
};

template <class Self, class OnException, class F, class R, class C, class... Ts>
auto guard_as(Self* self, OnException on_exception, F f, R (C::*)(Ts...) const) {
  return [self, on_exception, f = std::move(f)](Ts... xs) -> R {
    std::string what;
    messages_handled().fetch_add(1, std::memory_order_relaxed);
    try {
      if constexpr (requires { self->state.before_handler; })
        if (auto& hook = self->state.before_handler)
          hook();
      return f(std::forward<Ts>(xs)...);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
      what = "an exception of unknown type";
    }
    failure why = on_exception(self, what);
    return guard_fallback<R>::make(to_error(why));
  };
}

}  // namespace detail

/// `f` (a lambda: a handler, a response callback, a down handler) with the
/// same signature, run inside `self`'s guard.
template <class Self, class OnException, class F>
auto guard(Self* self, OnException on_exception, F f) {
  return detail::guard_as(self, on_exception, std::move(f), &F::operator());
}

/// The behavior of handlers `fs`, each one inside `self`'s guard.
template <class Behavior, class Self, class OnException, class... Fs>
Behavior guarded(Self* self, OnException on_exception, Fs... fs) {
  return Behavior{guard(self, on_exception, std::move(fs))...};
}

}  // namespace kvferry
