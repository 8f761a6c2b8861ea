#include "apps/common/host_pool.hpp"

#include <cstring>
#include <new>
#include <stdexcept>

#include "actors/plan/tp_mapping.hpp"

namespace kvferry::apps {

model_shape llama_7b() {
  return model_shape{"llama-7b", 32, 32, 128, kv_dtype::bf16, false};
}

model_shape deepseek_mla() {
  return model_shape{"deepseek-mla", 61, 1, 576, kv_dtype::bf16, true};
}

const std::vector<model_shape>& named_shapes() {
  static const std::vector<model_shape> all{
      llama_7b(), deepseek_mla(), model_shape{"tiny", 4, 8, 64, kv_dtype::bf16, false},
      model_shape{"tiny-gqa", 4, 2, 64, kv_dtype::bf16, false}};
  return all;
}

std::optional<model_shape> shape_named(const std::string& name) {
  for (auto& s : named_shapes())
    if (s.name == name)
      return s;
  return std::nullopt;
}

std::string shape_names() {
  std::string out;
  auto& all = named_shapes();
  for (size_t i = 0; i < all.size(); ++i)
    out += (i == 0 ? "" : i + 1 == all.size() ? " or " : ", ") + all[i].name;
  return out;
}

host_memory::host_memory(size_t bytes) {
  if (bytes == 0)
    return;
  auto made = transport::shared_memory::allocate(bytes, "kvferry-pool");
  if (!made.ok())
    throw std::bad_alloc{};
  mem_ = std::move(made).value();
}

host_pool::host_pool(const model_shape& shape, uint32_t page_size, uint32_t pages,
                     uint32_t aux_rows, uint32_t aux_row_bytes, rank_place place,
                     std::vector<state_spec> states)
    : shape_(shape),
      page_size_(page_size),
      pages_(pages),
      aux_rows_(aux_rows),
      aux_row_bytes_(aux_row_bytes),
      place_(place),
      aux_(uint64_t{aux_rows} * aux_row_bytes),
      state_specs_(std::move(states)) {
  if (page_size == 0 || pages == 0 || place.tp_size == 0 || place.pp_size == 0 ||
      place.pp_size > shape.layers)
    throw std::invalid_argument(
        "host_pool needs page_size, pages, tp and pp sizes above 0 and "
        "at most one PP stage per layer");
  for (auto l = place.pp_rank * shape.layers / place.pp_size;
       l < (place.pp_rank + 1) * shape.layers / place.pp_size; ++l)
    layers_.push_back(l);
  auto h = heads_of(shape.kv_heads, place.tp_size, place.tp_rank, shape.mla);
  heads_ = page_shape{page_size, h.first, h.count, shape.head_dim * dtype_size(shape.dtype)};
  item_len_ = uint64_t{page_size} * h.count * heads_.head_bytes;
  auto n = shape.mla ? layers_.size() : 2 * layers_.size();
  kv_.reserve(n);
  for (size_t i = 0; i < n; ++i)
    kv_.emplace_back(item_len_ * pages);
  for (auto& spec : state_specs_) {
    auto& c = states_.emplace_back();
    for (uint32_t b = 0; b < spec.buffers; ++b)
      c.emplace_back(uint64_t{spec.items} * spec.item_bytes);
  }
}

kv_pool host_pool::describe() const {
  kv_pool p;
  p.page_size = page_size_;
  p.dtype = shape_.dtype;
  p.layer_ids = layers_;
  p.total_kv_heads = shape_.kv_heads;
  p.kv_heads = heads_.heads;
  p.head_dim = shape_.head_dim;
  p.mla = shape_.mla;
  for (auto& m : kv_)
    p.kv.push_back({m.data(), m.size(), item_len_});
  if (aux_rows_ > 0)
    p.aux.push_back({aux_.data(), aux_.size(), aux_row_bytes_});
  for (size_t c = 0; c < states_.size(); ++c) {
    kv_pool::state st{state_specs_[c].kind, {}};
    for (auto& m : states_[c])
      st.buffers.push_back({m.data(), m.size(), state_specs_[c].item_bytes});
    p.states.push_back(std::move(st));
  }
  return p;
}

void host_pool::fill_room(uint64_t seed, uint64_t room, const std::vector<uint32_t>& pages,
                          uint32_t row) const {
  for (size_t b = 0; b < buffers(); ++b)
    for (uint32_t j = 0; j < pages.size(); ++j)
      fill_page(page(b, pages[j]), heads_, seed, room, j, layer_of(b), value_of(b));
  if (aux_rows_ > 0 && row != no_aux_slot)
    fill_aux(aux_row(row), aux_row_bytes_, seed, room);
}

bool host_pool::holds_room(uint64_t seed, uint64_t room, const std::vector<uint32_t>& pages,
                           uint32_t row, uint32_t skip_tokens) const {
  for (uint32_t j = 0; j < pages.size(); ++j)
    if (!holds_tokens(seed, room, pages[j], j, j == 0 ? skip_tokens : 0, page_size_))
      return false;
  return aux_rows_ == 0 || row == no_aux_slot ||
         check_aux(aux_row(row), aux_row_bytes_, seed, room);
}

bool host_pool::holds_tokens(uint64_t seed, uint64_t room, uint32_t page_no, uint32_t page_index,
                             uint32_t first, uint32_t end) const {
  for (size_t b = 0; b < buffers(); ++b)
    if (!check_tokens(page(b, page_no), heads_, seed, room, page_index, layer_of(b), value_of(b),
                      first, end))
      return false;
  return true;
}

}  // namespace kvferry::apps
