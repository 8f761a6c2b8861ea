// What a scheduler hands kvferry: its KV pool's geometry and the memory behind
// it. kvferry registers the buffers with the rank's transport; the memory must
// stay valid until the runtime is stopped. KV and state buffers may be GPU
// memory (buffer::memory); aux buffers are host memory (kvferry reads their
// rows).
#pragma once

#include <cstdint>
#include <vector>

#include "messages/layout.hpp"
#include "transport/device_memory.hpp"

namespace kvferry {

struct kv_pool {
  /// One buffer: `length` bytes at `base`, made of items of `item_len` bytes
  /// (a KV page, or an aux row).
  struct buffer {
    void* base = nullptr;
    uint64_t length = 0;
    uint64_t item_len = 0;
    /// Device memory is moved by the rank's device copier
    /// (rank_options::device_copier), never touched by the host.
    transport::memory_kind memory = transport::memory_kind::host;
  };

  uint32_t page_size = 0;  ///< tokens per page
  kv_dtype dtype = kv_dtype::bf16;
  std::vector<uint32_t> layer_ids;  ///< model layers held by this rank
  uint32_t total_kv_heads = 0;      ///< kv heads of the model
  uint32_t kv_heads = 0;            ///< kv heads held by this rank
  uint32_t head_dim = 0;
  bool mla = false;
  std::vector<buffer> kv;   ///< MHA: K of every layer, then V; MLA: one latent per layer
  std::vector<buffer> aux;  ///< aux buffers; the first 16 B of buffer 0's rows are kvferry's

  /// A state component beside the paged KV (Mamba-like slots, sliding-window pages).
  struct state {
    state_kind kind = state_kind::single_slot;
    std::vector<buffer> buffers;
  };
  std::vector<state> states;
};

}  // namespace kvferry
