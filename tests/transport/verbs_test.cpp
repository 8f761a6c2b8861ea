// What only the verbs backend has. Runs where an RDMA device exists; elsewhere
// each case prints "SKIPPED: <why>" (ctest reports it as skipped) and passes.
#include <catch2/catch.hpp>

#include <iostream>

#include "transport/verbs/verbs_device.hpp"

using namespace kvferry::transport;

TEST_CASE("verbs: the machine's RDMA devices are listed or the reason there are none",
          "[transport][verbs]") {
  auto devices = verbs::rdma_devices();
  if (!devices.ok()) {
    std::cout << "SKIPPED: " << devices.error().message() << std::endl;
    CHECK_THAT(devices.error().message(), Catch::Contains("no RDMA device"));
    return;
  }
  CHECK_FALSE(devices->empty());
  for (auto& name : *devices)
    CHECK_FALSE(name.empty());
}
