// CAF's test engine symbols (argc/argv, used by test_coordinator_fixture),
// without CAF's main: Catch2 provides main.
#define CAF_TEST_NO_MAIN
#include <caf/test/unit_test_impl.hpp>
