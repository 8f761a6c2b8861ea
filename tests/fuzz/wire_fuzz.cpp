// Fuzz harness: what a stranger's bytes do to a receiving rank's data plane,
// the hello, the challenge answer and the batch frames of tcp and shm
// (transport/tcp/tcp_receiver.cpp, transport/shm/shm_receiver.cpp,
// transport/base/admission_server.cpp, transport/base/peer_auth.cpp,
// transport/base/fence_table.cpp), run as they run: a real
// receiver listens, the harness connects, writes the input, closes its
// side, and reads until the receiver closes (at most 3 s).
//
// The input's first byte picks the backend (even: tcp, odd: shm); the rest
// is what the stranger sends. The receiver has one registered region of
// 64 KiB filled with a pattern, and fence 7 open with every page of it
// granted to a sender named "tcp://127.0.0.1:9" (whose credential the
// stranger does not have).
//
// Invariants (a broken one aborts: a finding):
//   - no byte of the region changes: nothing lands without the credential;
//   - the receiver closes the connection by itself (no thread stays stuck);
//   - the listener still accepts a connection afterwards.
// Memory errors are ASan's findings (the default build of the harnesses).
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_main.hpp"
#include "transport/base/posix_socket.hpp"
#include "transport/grant.hpp"
#include "transport/registry.hpp"
#include "transport/shared_memory.hpp"
#include "transport/shm/shm_socket.hpp"

using namespace kvferry;

namespace {

constexpr size_t region_bytes = 64 * 1024;
constexpr size_t page_bytes = 4096;
constexpr unsigned char pattern = 0x5a;

transport::socket_fd dial(const std::string& backend, const std::string& endpoint) {
  if (backend == "tcp") {
    auto where = transport::parse_endpoint(endpoint);
    fuzz_check(where.ok(), "the receiver's endpoint parses");
    auto fd = transport::connect_to(where.value(), 2000);
    return fd.ok() ? std::move(fd).value() : transport::socket_fd{};
  }
  auto fd = transport::shm::connect_abstract(endpoint.substr(std::strlen("shm://")));
  return fd.ok() ? std::move(fd).value() : transport::socket_fd{};
}

/// Reads until the peer closes; false after `ms` without that.
bool closed_by_peer(int fd, int ms) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds{ms};
  char buf[4096];
  while (std::chrono::steady_clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0)
      continue;
    auto n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0)
      return true;
  }
  return false;
}

}  // namespace

int kvferry_fuzz_one(const uint8_t* data, size_t size) {
  if (size == 0)
    return 0;
  std::string backend = data[0] % 2 == 0 ? "tcp" : "shm";
  // Shared memory for both backends (shm peers map the region they write);
  // made first, so it outlives the receiver.
  auto mem = transport::shared_memory::allocate(region_bytes, "kvferry-fuzz");
  fuzz_check(mem.ok(), "shared memory for the region");
  auto shared = std::move(mem).value();
  auto made = transport::make_transport(backend, {});
  fuzz_check(made.ok(), "the receiver starts");
  auto rx = std::move(made).value();
  std::span<unsigned char> region{reinterpret_cast<unsigned char*>(shared.data()), region_bytes};
  std::memset(region.data(), pattern, region.size());
  auto id = rx->register_region(region.data(), region.size());
  if (!id.ok())
    std::fprintf(stderr, "%s\n", id.error().to_string().c_str());
  fuzz_check(id.ok(), "the region registers");
  transport::grant g;
  g.senders.push_back("tcp://127.0.0.1:9");
  auto pages = std::make_shared<std::vector<uint32_t>>(region_bytes / page_bytes);
  std::iota(pages->begin(), pages->end(), 0u);
  g.buffers.push_back({id.value(), 0, region_bytes, page_bytes, pages});
  rx->open_fence(7, g);

  auto fd = dial(backend, rx->endpoint());
  fuzz_check(fd.valid(), "the listener accepts");
  timeval tv{2, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  size_t sent = 0;
  while (sent < size - 1) {
    auto n = ::send(fd.get(), data + 1 + sent, size - 1 - sent, MSG_NOSIGNAL);
    if (n <= 0)
      break;  // the receiver closed early: a refusal
    sent += static_cast<size_t>(n);
  }
  ::shutdown(fd.get(), SHUT_WR);
  fuzz_check(closed_by_peer(fd.get(), 3000), "the receiver closes a stranger's connection");
  fd.close();
  for (auto b : region)
    fuzz_check(b == pattern, "no byte lands without the credential");
  auto again = dial(backend, rx->endpoint());
  fuzz_check(again.valid(), "the listener still accepts");
  return 0;
}
