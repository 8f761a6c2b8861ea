// The other process of the CUDA IPC test (tests/cuda/cuda_test.cpp): opens the
// handle given as hex, checks the exporter's bytes (i * 7 + 3), writes its own
// (i * 11 + 5) into the same device memory, and exits 0; or prints why not and
// exits 1. A fresh process (fork + exec), since CUDA does not survive a fork.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "transport/cuda/cuda_ipc.hpp"
#include "transport/cuda/cuda_memory.hpp"

using namespace kvferry::transport;

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: cuda_ipc_peer HANDLE_HEX BYTES\n");
    return 2;
  }
  std::string hex = argv[1];
  size_t bytes = std::strtoull(argv[2], nullptr, 10);
  std::vector<std::byte> raw;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    raw.push_back(std::byte(std::stoi(hex.substr(i, 2), nullptr, 16)));
  auto handle = cuda::ipc_handle_from_bytes(raw);
  if (!handle.ok()) {
    std::fprintf(stderr, "cuda_ipc_peer: %s\n", handle.error().to_string().c_str());
    return 1;
  }
  auto mapping = cuda::ipc_mapping::open(*handle, bytes);
  if (!mapping.ok()) {
    std::fprintf(stderr, "cuda_ipc_peer: %s\n", mapping.error().to_string().c_str());
    return 1;
  }
  std::vector<unsigned char> host(bytes);
  if (auto st = cuda::copy_bytes(host.data(), mapping->data(), bytes); !st.ok()) {
    std::fprintf(stderr, "cuda_ipc_peer: %s\n", st.to_string().c_str());
    return 1;
  }
  for (size_t i = 0; i < bytes; ++i)
    if (host[i] != static_cast<unsigned char>(i * 7 + 3)) {
      std::fprintf(stderr, "cuda_ipc_peer: byte %zu is %u, the exporter wrote %u\n", i,
                   unsigned(host[i]), unsigned(static_cast<unsigned char>(i * 7 + 3)));
      return 1;
    }
  for (size_t i = 0; i < bytes; ++i)
    host[i] = static_cast<unsigned char>(i * 11 + 5);
  if (auto st = cuda::copy_bytes(mapping->data(), host.data(), bytes); !st.ok()) {
    std::fprintf(stderr, "cuda_ipc_peer: %s\n", st.to_string().c_str());
    return 1;
  }
  return 0;
}
