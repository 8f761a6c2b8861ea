#include "apps/common/host_pool.hpp"

#include <sys/mman.h>

#include <cstring>
#include <new>
#include <stdexcept>

namespace kvferry::apps {

model_shape llama_7b() {
  return model_shape{"llama-7b", 32, 32, 128, kv_dtype::bf16, false};
}

model_shape deepseek_mla() {
  return model_shape{"deepseek-mla", 61, 1, 576, kv_dtype::bf16, true};
}

host_memory::host_memory(size_t bytes) : size_(bytes) {
  if (bytes == 0)
    return;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    throw std::bad_alloc{};
  ::madvise(p, bytes, MADV_HUGEPAGE);
  std::memset(p, 0, bytes);  // pre-fault: a first touch costs ~50x a copy on this kind of VM
  data_ = static_cast<std::byte*>(p);
}

host_memory::host_memory(host_memory&& other) noexcept : data_(other.data_), size_(other.size_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

host_memory::~host_memory() {
  if (data_)
    ::munmap(data_, size_);
}

host_pool::host_pool(const model_shape& shape, uint32_t page_size, uint32_t pages,
                     uint32_t aux_rows, uint32_t aux_row_bytes)
    : shape_(shape),
      page_size_(page_size),
      pages_(pages),
      aux_rows_(aux_rows),
      aux_row_bytes_(aux_row_bytes),
      item_len_(uint64_t{page_size} * shape.kv_heads * shape.head_dim * dtype_size(shape.dtype)),
      aux_(uint64_t{aux_rows} * aux_row_bytes) {
  if (page_size == 0 || pages == 0)
    throw std::invalid_argument("host_pool needs page_size and pages above 0");
  auto n = shape.mla ? shape.layers : 2 * shape.layers;
  kv_.reserve(n);
  for (uint32_t i = 0; i < n; ++i)
    kv_.emplace_back(item_len_ * pages);
}

kv_pool host_pool::describe() const {
  kv_pool p;
  p.page_size = page_size_;
  p.dtype = shape_.dtype;
  for (uint32_t l = 0; l < shape_.layers; ++l)
    p.layer_ids.push_back(l);
  p.total_kv_heads = shape_.kv_heads;
  p.kv_heads = shape_.kv_heads;
  p.head_dim = shape_.head_dim;
  p.mla = shape_.mla;
  for (auto& m : kv_)
    p.kv.push_back({m.data(), m.size(), item_len_});
  if (aux_rows_ > 0)
    p.aux.push_back({aux_.data(), aux_.size(), aux_row_bytes_});
  return p;
}

}  // namespace kvferry::apps
