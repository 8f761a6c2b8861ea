// Exceptions inside an actor's handlers, caught where they happen. CAF 0.17
// terminates an actor on any exception that escapes a handler, whatever its
// exception handler returns; a rank actor that died that way would leave the
// states its scheduler polls behind. Every handler of the rank actors and the
// decider goes through guarded(): the exception is handed to the actor's
// `on_exception` (which fails its live rooms with the cause, so the verdict
// names it), a request gets errc::internal back, and the actor carries on.
#pragma once

#include <exception>
#include <string>
#include <utility>

#include <caf/result.hpp>

#include "messages/failure.hpp"

namespace kvferry {

namespace detail {

template <class R>
struct guard_fallback {
  static R make(const std::string& what) { return R{make_error(errc::internal, what)}; }
};

template <>
struct guard_fallback<void> {
  static void make(const std::string&) {}
};

template <class OnException, class F, class R, class C, class... Ts>
auto guard_as(OnException on_exception, F f, R (C::*)(Ts...) const) {
  return [on_exception, f = std::move(f)](Ts... xs) -> R {
    std::string what;
    try {
      return f(std::forward<Ts>(xs)...);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
      what = "an exception of unknown type";
    }
    on_exception(what);
    return guard_fallback<R>::make(what);
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
