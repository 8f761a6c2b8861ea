// A KV pool in host memory shaped like one rank's share of a model, for the
// demo, the bench and the tests: one buffer per layer it holds (MLA) or per
// layer and K/V (MHA), of its TP share of the heads, aux rows, optional state
// components, and the kv_pool description a runtime takes. Memory is
// memfd-backed shared memory (so every backend, shm included, can register
// it) and pre-faulted.
#pragma once

#include <optional>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "actors/facade/kv_pool.hpp"
#include "apps/common/kv_pattern.hpp"
#include "messages/layout.hpp"
#include "transport/shared_memory.hpp"

namespace kvferry::apps {

/// The KV geometry of a model (the whole model, before TP/PP splitting).
struct model_shape {
  std::string name = "custom";
  uint32_t layers = 1;
  uint32_t kv_heads = 1;    ///< kv heads of the model (MLA: 1)
  uint32_t head_dim = 128;  ///< per head (MLA: latent width)
  kv_dtype dtype = kv_dtype::bf16;
  bool mla = false;
};

/// A Llama-2-7B-like MHA shape: 32 layers, 32 kv heads of 128, bf16.
model_shape llama_7b();
/// A DeepSeek-like MLA shape: 61 layers, one latent of 576, bf16.
model_shape deepseek_mla();

/// The shapes the binaries know by name: llama-7b, deepseek-mla, tiny (MHA, 8
/// heads) and tiny-gqa (2 heads), in that order.
const std::vector<model_shape>& named_shapes();

/// The shape called `name`, or nullopt.
std::optional<model_shape> shape_named(const std::string& name);

/// "llama-7b, deepseek-mla, tiny or tiny-gqa", for error messages.
std::string shape_names();

/// Where a rank sits in its instance.
struct rank_place {
  uint32_t tp_rank = 0;
  uint32_t tp_size = 1;
  uint32_t pp_rank = 0;
  uint32_t pp_size = 1;
};

/// A state component to allocate beside the KV.
struct state_spec {
  state_kind kind = state_kind::single_slot;
  uint32_t buffers = 1;
  uint32_t items = 4;
  uint32_t item_bytes = 64;  ///< a multiple of 8
};

/// Shared (memfd) memory, pre-faulted, released on destruction; empty for 0
/// bytes. Throws std::bad_alloc when the system refuses it.
class host_memory {
 public:
  explicit host_memory(size_t bytes);
  host_memory(host_memory&& other) noexcept = default;
  host_memory& operator=(host_memory&&) = delete;
  host_memory(const host_memory&) = delete;
  ~host_memory() = default;
  std::byte* data() const { return mem_.data(); }
  size_t size() const { return mem_.size(); }

 private:
  transport::shared_memory mem_;
};

/// One rank's pool: `pages` pages per KV buffer, `aux_rows` aux rows.
class host_pool {
 public:
  host_pool(const model_shape& shape, uint32_t page_size, uint32_t pages, uint32_t aux_rows,
            uint32_t aux_row_bytes = 64, rank_place place = {},
            std::vector<state_spec> states = {});

  kv_pool describe() const;

  size_t buffers() const { return kv_.size(); }
  uint64_t item_len() const { return item_len_; }
  uint32_t pages() const { return pages_; }
  uint32_t aux_rows() const { return aux_rows_; }
  uint32_t aux_row_bytes() const { return aux_row_bytes_; }
  const model_shape& shape() const { return shape_; }
  uint32_t page_size() const { return page_size_; }
  const rank_place& place() const { return place_; }
  const std::vector<uint32_t>& layer_ids() const { return layers_; }

  std::byte* page(size_t buffer, uint32_t page) const {
    return kv_[buffer].data() + uint64_t{page} * item_len_;
  }
  std::byte* aux_row(uint32_t row) const { return aux_.data() + uint64_t{row} * aux_row_bytes_; }

  /// The model layer and K/V of buffer `buffer`.
  uint32_t layer_of(size_t buffer) const { return layers_[buffer % layers_.size()]; }
  bool value_of(size_t buffer) const { return buffer >= layers_.size(); }
  /// This rank's heads, for the pattern.
  const page_shape& heads() const { return heads_; }

  /// Bytes of KV one page carries across all buffers.
  uint64_t page_bytes() const { return item_len_ * kv_.size(); }

  /// State components.
  const std::vector<state_spec>& state_specs() const { return state_specs_; }
  std::byte* state_item(size_t component, size_t buffer, uint32_t index) const {
    return states_[component][buffer].data() + uint64_t{index} * state_specs_[component].item_bytes;
  }

  /// Writes the pattern of room `room` into pages `pages` (logical order) of
  /// every buffer, its aux payload into aux row `row` (no_aux_slot: none).
  void fill_room(uint64_t seed, uint64_t room, const std::vector<uint32_t>& pages,
                 uint32_t row) const;

  /// True if pages `pages` (logical order) of every buffer hold room `room`'s
  /// pattern for this rank's heads (and the aux payload, unless `row` is
  /// no_aux_slot); of the first page only the tokens from `skip_tokens` on
  /// (prefix reuse).
  bool holds_room(uint64_t seed, uint64_t room, const std::vector<uint32_t>& pages, uint32_t row,
                  uint32_t skip_tokens = 0) const;

  /// True if tokens [first, end) of page `page` of every buffer hold room
  /// `room`'s pattern as the room's page `page_index`.
  bool holds_tokens(uint64_t seed, uint64_t room, uint32_t page, uint32_t page_index,
                    uint32_t first, uint32_t end) const;

 private:
  model_shape shape_;
  uint32_t page_size_;
  uint32_t pages_;
  uint32_t aux_rows_;
  uint32_t aux_row_bytes_;
  rank_place place_;
  std::vector<uint32_t> layers_;
  page_shape heads_;
  uint64_t item_len_;
  std::vector<host_memory> kv_;
  host_memory aux_;
  std::vector<state_spec> state_specs_;
  std::vector<std::vector<host_memory>> states_;
};

}  // namespace kvferry::apps
