// Runs CAF's deterministic test DSL (caf/test/dsl.hpp, io_dsl.hpp) under
// Catch2. CAF's CAF_CHECK/CAF_REQUIRE/CAF_FAIL report to CAF's own test
// engine, which does not run here: they are redefined as Catch2 assertions
// before the DSL is parsed. Include this header first in every actor test;
// link tests/support/caf_catch_impl.cpp once per binary.
#pragma once

#include <catch2/catch.hpp>  // first: dsl.hpp uses a bare FAIL(...)

#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>

#include <caf/deep_to_string.hpp>
#include <caf/test/unit_test.hpp>

namespace caf_catch {

/// Builds the text of CAF's streamed messages (`CAF_MESSAGE(a << b)`).
struct msg_builder {
  std::string str;

  template <class T>
  msg_builder& operator<<(const T& x) {
    if constexpr (std::is_convertible_v<const T&, std::string_view>) {
      str += std::string_view{x};
    } else if constexpr (std::is_arithmetic_v<T>) {
      str += std::to_string(x);
    } else if constexpr (requires { to_string(x); }) {
      str += to_string(x);
    } else {
      str += caf::deep_to_string(x);
    }
    return *this;
  }
};

/// Ends a failed CAF_FAIL path (Catch2's FAIL throws; this keeps the compiler
/// sure that nothing returns from it).
[[noreturn]] inline void unreachable() {
  throw std::logic_error("unreachable after FAIL");
}

}  // namespace caf_catch

#undef CAF_MESSAGE
#undef CAF_FAIL
#undef CAF_ERROR
#undef CAF_CHECK
#undef CAF_CHECK_FAIL
#undef CAF_CHECK_EQUAL
#undef CAF_CHECK_NOT_EQUAL
#undef CAF_CHECK_LESS
#undef CAF_CHECK_NOT_LESS
#undef CAF_CHECK_LESS_OR_EQUAL
#undef CAF_CHECK_NOT_LESS_OR_EQUAL
#undef CAF_CHECK_GREATER
#undef CAF_CHECK_NOT_GREATER
#undef CAF_CHECK_GREATER_OR_EQUAL
#undef CAF_CHECK_NOT_GREATER_OR_EQUAL
#undef CAF_REQUIRE
#undef CAF_REQUIRE_EQUAL
#undef CAF_REQUIRE_NOT_EQUAL
#undef CAF_REQUIRE_LESS
#undef CAF_REQUIRE_NOT_LESS
#undef CAF_REQUIRE_LESS_OR_EQUAL
#undef CAF_REQUIRE_NOT_LESS_OR_EQUAL
#undef CAF_REQUIRE_GREATER
#undef CAF_REQUIRE_NOT_GREATER
#undef CAF_REQUIRE_GREATER_OR_EQUAL
#undef CAF_REQUIRE_NOT_GREATER_OR_EQUAL

#define CAF_MESSAGE(msg) UNSCOPED_INFO((::caf_catch::msg_builder{} << msg).str)
#define CAF_FAIL(msg)                              \
  do {                                             \
    FAIL((::caf_catch::msg_builder{} << msg).str); \
    ::caf_catch::unreachable();                    \
  } while (false)
#define CAF_ERROR(msg) FAIL_CHECK((::caf_catch::msg_builder{} << msg).str)
#define CAF_CHECK(...) CHECK(static_cast<bool>(__VA_ARGS__))
#define CAF_CHECK_FAIL(...) CHECK_FALSE(static_cast<bool>(__VA_ARGS__))
#define CAF_CHECK_EQUAL(x, y) CHECK((x) == (y))
#define CAF_CHECK_NOT_EQUAL(x, y) CHECK((x) != (y))
#define CAF_CHECK_LESS(x, y) CHECK((x) < (y))
#define CAF_CHECK_NOT_LESS(x, y) CHECK(!((x) < (y)))
#define CAF_CHECK_LESS_OR_EQUAL(x, y) CHECK((x) <= (y))
#define CAF_CHECK_NOT_LESS_OR_EQUAL(x, y) CHECK(!((x) <= (y)))
#define CAF_CHECK_GREATER(x, y) CHECK((x) > (y))
#define CAF_CHECK_NOT_GREATER(x, y) CHECK(!((x) > (y)))
#define CAF_CHECK_GREATER_OR_EQUAL(x, y) CHECK((x) >= (y))
#define CAF_CHECK_NOT_GREATER_OR_EQUAL(x, y) CHECK(!((x) >= (y)))
#define CAF_REQUIRE(...) REQUIRE(static_cast<bool>(__VA_ARGS__))
#define CAF_REQUIRE_EQUAL(x, y) REQUIRE((x) == (y))
#define CAF_REQUIRE_NOT_EQUAL(x, y) REQUIRE((x) != (y))
#define CAF_REQUIRE_LESS(x, y) REQUIRE((x) < (y))
#define CAF_REQUIRE_NOT_LESS(x, y) REQUIRE(!((x) < (y)))
#define CAF_REQUIRE_LESS_OR_EQUAL(x, y) REQUIRE((x) <= (y))
#define CAF_REQUIRE_NOT_LESS_OR_EQUAL(x, y) REQUIRE(!((x) <= (y)))
#define CAF_REQUIRE_GREATER(x, y) REQUIRE((x) > (y))
#define CAF_REQUIRE_NOT_GREATER(x, y) REQUIRE(!((x) > (y)))
#define CAF_REQUIRE_GREATER_OR_EQUAL(x, y) REQUIRE((x) >= (y))
#define CAF_REQUIRE_NOT_GREATER_OR_EQUAL(x, y) REQUIRE(!((x) >= (y)))

#include <caf/test/dsl.hpp>  // its templates now expand to Catch2 assertions
