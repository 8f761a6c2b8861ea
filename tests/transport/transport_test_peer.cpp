// The other process of the transport fault tests: a receiver that registers a
// shared region and waits, or a sender that writes into a peer without pause,
// so that a test can kill it mid-write.
//   transport_test_peer receiver BACKEND BYTES [HOST]
//       listens on HOST (default 127.0.0.1), prints "ready ENDPOINT REGION",
//       exits when stdin closes
//   transport_test_peer sender BACKEND ENDPOINT REGION BYTES FENCE
//       posts batches of one BYTES write, 4 in flight, until killed; prints
//       "writing ENDPOINT" after its first batch landed
#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <string>

#include "tests/support/trusting.hpp"
#include "transport/registry.hpp"
#include "transport/shared_memory.hpp"

using namespace kvferry::transport;

namespace {

int fail(const std::string& why) {
  std::cerr << "transport_test_peer: " << why << std::endl;
  return 1;
}

int run_receiver(const std::string& backend, uint64_t bytes, const std::string& host) {
  options opts;
  opts.listen_host = host;
  auto net = make_transport(backend, kvferry::test::trusting(opts));
  if (!net.ok())
    return fail(net.error().to_string());
  auto mem = shared_memory::allocate(bytes);
  if (!mem.ok())
    return fail(mem.error().to_string());
  auto region = (*net)->register_region(mem->data(), mem->size());
  if (!region.ok())
    return fail(region.error().to_string());
  std::cout << "ready " << (*net)->endpoint() << " " << *region << std::endl;
  char c;
  while (::read(0, &c, 1) > 0)
    ;
  return 0;
}

int run_sender(const std::string& backend, const std::string& endpoint, region_id remote,
               uint64_t bytes, uint64_t fence) {
  auto net = make_transport(backend, kvferry::test::trusting());
  if (!net.ok())
    return fail(net.error().to_string());
  auto mem = shared_memory::allocate(bytes);
  if (!mem.ok())
    return fail(mem.error().to_string());
  auto local = (*net)->register_region(mem->data(), mem->size());
  if (!local.ok())
    return fail(local.error().to_string());
  std::mutex mu;
  std::condition_variable cv;
  uint64_t done = 0, ok = 0;
  (*net)->set_completion_handler([&](completion c) {
    std::lock_guard guard{mu};
    ++done;
    if (c.result.ok() && ok++ == 0)
      std::cout << "writing " << endpoint << std::endl;
    if (!c.result.ok())
      std::cout << "failed " << c.result.to_string() << std::endl;
    cv.notify_all();
  });
  auto peer = (*net)->connect(endpoint);
  if (!peer.ok())
    return fail(peer.error().to_string());
  for (uint64_t i = 0;; ++i) {
    {
      std::unique_lock guard{mu};
      cv.wait(guard, [&] { return i - done < 4; });
    }
    if (auto st = (*net)->post(*peer, write_batch{i, {{*local, 0, remote, 0, bytes}}, fence});
        !st.ok())
      return fail(st.to_string());
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "receiver" && (argc == 4 || argc == 5))
    return run_receiver(argv[2], std::strtoull(argv[3], nullptr, 10),
                        argc == 5 ? argv[4] : "127.0.0.1");
  if (mode == "sender" && argc == 7)
    return run_sender(argv[2], argv[3], static_cast<region_id>(std::strtoul(argv[4], nullptr, 10)),
                      std::strtoull(argv[5], nullptr, 10), std::strtoull(argv[6], nullptr, 10));
  return fail("usage: receiver BACKEND BYTES [HOST] | sender BACKEND ENDPOINT REGION BYTES FENCE");
}
