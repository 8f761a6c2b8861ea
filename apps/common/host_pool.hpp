// A KV pool in host memory shaped like a model's, for the demo, the bench and
// the tests: one buffer per layer (MLA) or per layer and K/V (MHA), aux rows,
// and the kv_pool description a runtime takes. Memory is pre-faulted (with
// transparent huge pages where the kernel gives them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "actors/facade/kv_pool.hpp"
#include "messages/layout.hpp"

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

/// Anonymous memory, pre-faulted, released on destruction.
class host_memory {
 public:
  explicit host_memory(size_t bytes);
  host_memory(host_memory&& other) noexcept;
  host_memory& operator=(host_memory&&) = delete;
  host_memory(const host_memory&) = delete;
  ~host_memory();
  std::byte* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

/// One rank's pool: `pages` pages per KV buffer and `aux_rows` aux rows.
class host_pool {
 public:
  /// The rank holds all layers and all heads (TP 1, PP 1).
  host_pool(const model_shape& shape, uint32_t page_size, uint32_t pages, uint32_t aux_rows,
            uint32_t aux_row_bytes = 64);

  kv_pool describe() const;

  size_t buffers() const { return kv_.size(); }
  uint64_t item_len() const { return item_len_; }
  uint32_t pages() const { return pages_; }
  uint32_t aux_rows() const { return aux_rows_; }
  uint32_t aux_row_bytes() const { return aux_row_bytes_; }
  const model_shape& shape() const { return shape_; }
  uint32_t page_size() const { return page_size_; }

  std::byte* page(size_t buffer, uint32_t page) const {
    return kv_[buffer].data() + uint64_t{page} * item_len_;
  }
  std::byte* aux_row(uint32_t row) const { return aux_.data() + uint64_t{row} * aux_row_bytes_; }

  /// Bytes of KV one page carries across all buffers.
  uint64_t page_bytes() const { return item_len_ * kv_.size(); }

 private:
  model_shape shape_;
  uint32_t page_size_;
  uint32_t pages_;
  uint32_t aux_rows_;
  uint32_t aux_row_bytes_;
  uint64_t item_len_;
  std::vector<host_memory> kv_;
  host_memory aux_;
};

}  // namespace kvferry::apps
