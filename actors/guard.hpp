// Exceptions inside an actor's handlers, caught where they happen. CAF 0.17
// terminates an actor on any exception that escapes a handler, whatever its
// exception handler returns; a rank actor that died that way would leave the
// states its scheduler polls behind. Every handler of the rank actors, the
// decider, the staging actor and the bootstrap goes through guarded(): the
// exception is handed to the actor's `on_exception` (which fails the rooms it
// concerns with the cause, so the verdict names it), a request gets an error
// back, and the actor carries on.
//
// `on_exception(what)` may return the `failure` it made of the exception
// (naming the actor): a request whose handler threw then gets that failure as
// its error, so that the asker can fail its rooms with the same cause.
#pragma once

#include <exception>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include <caf/error.hpp>
#include <caf/result.hpp>

#include "messages/failure.hpp"

namespace kvferry {

/// A fault planted by a test, the way leveldb's fault-injection Env plants
/// them in an Env: the next guarded handler (or callback) that runs on this
/// thread throws std::runtime_error(planted_fault) from inside its guard, as a
/// bug in it would, and the plant is used up. Under CAF's test coordinator
/// every actor runs on the test's thread, so a test plants it right before it
/// runs the one job it means to hit. Production code never sets it.
inline thread_local std::string planted_fault;

/// Throws the planted fault, if any (and clears it). guard() calls it first;
/// handlers that catch their own exceptions (the transfer actor's) call it
/// inside their try.
inline void fire_planted_fault() {
  if (planted_fault.empty())
    return;
  throw std::runtime_error(std::exchange(planted_fault, {}));
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

/// Hands `what` to `on_exception`; returns the error a request gets for it.
template <class OnException>
caf::error handle_exception(const OnException& on_exception, const std::string& what) {
  using made = std::invoke_result_t<const OnException&, const std::string&>;
  if constexpr (std::is_same_v<made, failure>) {
    return to_error(on_exception(what));
  } else {
    on_exception(what);
    return make_error(errc::internal, what);
  }
}

template <class OnException, class F, class R, class C, class... Ts>
auto guard_as(OnException on_exception, F f, R (C::*)(Ts...) const) {
  return [on_exception, f = std::move(f)](Ts... xs) -> R {
    std::string what;
    try {
      fire_planted_fault();
      return f(std::forward<Ts>(xs)...);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
      what = "an exception of unknown type";
    }
    return guard_fallback<R>::make(handle_exception(on_exception, what));
  };
}

}  // namespace detail

/// `f` (a lambda) with the same signature, catching what it throws.
template <class OnException, class F>
auto guard(OnException on_exception, F f) {
  return detail::guard_as(on_exception, std::move(f), &F::operator());
}

/// The behavior of handlers `fs`, each one guarded.
template <class Behavior, class OnException, class... Fs>
Behavior guarded(OnException on_exception, Fs... fs) {
  return Behavior{guard(on_exception, std::move(fs))...};
}

}  // namespace kvferry
