#include "messages/layout.hpp"

#include <algorithm>
#include <array>
#include <utility>

namespace kvferry {

namespace {

constexpr std::array<std::pair<kv_dtype, std::string_view>, 6> dtype_names{{
    {kv_dtype::f32, "f32"},
    {kv_dtype::f16, "f16"},
    {kv_dtype::bf16, "bf16"},
    {kv_dtype::fp8_e4m3, "fp8_e4m3"},
    {kv_dtype::fp8_e5m2, "fp8_e5m2"},
    {kv_dtype::int8, "int8"},
}};

/// "FIELD VALUE out of range, expected at most HI (WHY)" (or "at least LO"),
/// or nullopt when inside [lo, hi].
std::optional<std::string> outside(std::string_view field, uint64_t v, uint64_t lo, uint64_t hi,
                                   std::string_view why) {
  if (v >= lo && v <= hi)
    return std::nullopt;
  return std::string{field} + " " + std::to_string(v) + " out of range, expected " +
         (v < lo ? "at least " + std::to_string(lo) : "at most " + std::to_string(hi)) + " (" +
         std::string{why} + ")";
}

/// A buffer whose bytes run past 2^64 (offset + length overflows).
std::optional<std::string> wraps(const std::string& what, const buffer_desc& b) {
  if (b.length <= UINT64_MAX - b.offset)
    return std::nullopt;
  return what + " offset " + std::to_string(b.offset) + " + length " + std::to_string(b.length) +
         " runs past 2^64 bytes";
}

template <class T>
std::optional<std::string> differ(std::string_view field, const T& p, const T& d) {
  if (p == d)
    return std::nullopt;
  return std::string{field} + " prefill=" + std::to_string(p) + " decode=" + std::to_string(d);
}

}  // namespace

std::string format_ids(const std::vector<uint32_t>& xs) {
  std::string s = "[";
  for (size_t i = 0; i < xs.size(); ++i) {
    if (i > 0)
      s += ",";
    if (i == 8 && xs.size() > 10) {
      s += "...," + std::to_string(xs.back());
      break;
    }
    s += std::to_string(xs[i]);
  }
  return s + "]";
}

uint32_t dtype_size(kv_dtype x) {
  switch (x) {
    case kv_dtype::f32:
      return 4;
    case kv_dtype::f16:
    case kv_dtype::bf16:
      return 2;
    case kv_dtype::fp8_e4m3:
    case kv_dtype::fp8_e5m2:
    case kv_dtype::int8:
      return 1;
  }
  return 0;
}

std::string to_string(kv_dtype x) {
  for (auto& [v, name] : dtype_names)
    if (v == x)
      return std::string{name};
  return "dtype(" + std::to_string(static_cast<int>(x)) + ")";
}

std::optional<kv_dtype> parse_dtype(std::string_view name) {
  for (auto& [v, n] : dtype_names)
    if (n == name)
      return v;
  return std::nullopt;
}

std::string to_string(state_kind x) {
  return x == state_kind::single_slot ? "single_slot" : "page_indexed";
}

uint32_t heads_per_rank(uint32_t total_heads, uint32_t tp_size) {
  if (tp_size == 0)
    return 0;
  return std::max(1u, total_heads / tp_size);
}

uint64_t kv_layout::state_capacity(size_t i) const {
  auto& st = states.at(i);
  if (st.buffers.empty())
    return 0;
  uint64_t n = st.buffers.front().capacity();
  for (auto& b : st.buffers)
    n = std::min(n, b.capacity());
  return n;
}

int kv_layout::buffer_of(uint32_t layer_id, bool value) const {
  auto i = std::find(layer_ids.begin(), layer_ids.end(), layer_id);
  if (i == layer_ids.end() || (value && mla))
    return -1;
  auto idx = static_cast<int>(i - layer_ids.begin());
  return value ? idx + static_cast<int>(layer_ids.size()) : idx;
}

uint64_t kv_layout::token_bytes() const {
  return uint64_t{kv_heads} * head_dim * dtype_size(dtype);
}

uint64_t kv_layout::page_capacity() const {
  if (kv_buffers.empty())
    return 0;
  uint64_t n = kv_buffers.front().capacity();
  for (auto& b : kv_buffers)
    n = std::min(n, b.capacity());
  return n;
}

uint64_t kv_layout::aux_capacity() const {
  if (aux_buffers.empty())
    return 0;
  uint64_t n = aux_buffers.front().capacity();
  for (auto& b : aux_buffers)
    n = std::min(n, b.capacity());
  return n;
}

std::optional<std::string> validate(const kv_layout& x) {
  if (x.version != protocol_version)
    return "protocol version " + std::to_string(x.version) + ", expected " +
           std::to_string(protocol_version);
  if (x.page_size == 0)
    return std::string{"page_size 0, expected at least 1 token per page"};
  if (auto m = outside("page_size", x.page_size, 1, max_page_size, "tokens per page"))
    return m;
  if (dtype_size(x.dtype) == 0)
    return "dtype " + to_string(x.dtype) + " is not a known KV dtype";
  if (x.layer_ids.empty())
    return std::string{"layer_ids empty, expected at least one layer"};
  // The caps first: every later check may loop over or multiply these (zero
  // sizes are left to the checks below, which say what they need).
  if (auto m = outside("layer count", x.layer_ids.size(), 1, max_layers, "layers of one rank"))
    return m;
  if (auto m = outside("total_kv_heads", x.total_kv_heads, 0, max_kv_heads, "kv heads of a model"))
    return m;
  if (auto m = outside("head_dim", x.head_dim, 0, max_head_dim, "elements per head"))
    return m;
  if (auto m = outside("tp_size", x.tp_size, 0, max_tp_size, "ranks of one TP group"))
    return m;
  if (auto m = outside("pp_size", x.pp_size, 0, max_pp_size, "PP stages of one instance"))
    return m;
  if (auto m = outside("tp_size x pp_size", uint64_t{x.tp_size} * x.pp_size, 0, max_instance_ranks,
                       "ranks of one instance"))
    return m;
  if (auto m = outside("aux buffer count", x.aux_buffers.size(), 0, max_aux_buffers, "per rank"))
    return m;
  if (auto m = outside("state component count", x.states.size(), 0, max_states, "per rank"))
    return m;
  for (size_t i = 0; i < x.states.size(); ++i)
    if (auto m = outside("state component " + std::to_string(i) + " buffer count",
                         x.states[i].buffers.size(), 0, max_state_buffers, "per component"))
      return m;
  {
    auto ids = x.layer_ids;
    std::sort(ids.begin(), ids.end());
    if (auto dup = std::adjacent_find(ids.begin(), ids.end()); dup != ids.end())
      return "layer id " + std::to_string(*dup) + " listed twice in layer_ids " +
             format_ids(x.layer_ids) + ", expected distinct layers";
  }
  if (x.head_dim == 0 || x.kv_heads == 0)
    return "kv_heads " + std::to_string(x.kv_heads) + " head_dim " + std::to_string(x.head_dim) +
           ", expected both at least 1";
  if (x.mla && x.kv_heads != 1)
    return "MLA layout with kv_heads " + std::to_string(x.kv_heads) +
           ", expected 1 (one latent per token)";
  if (x.total_kv_heads < x.kv_heads)
    return "total_kv_heads " + std::to_string(x.total_kv_heads) + " below kv_heads " +
           std::to_string(x.kv_heads) + " held by this rank";
  if (x.tp_size == 0 || x.tp_rank >= x.tp_size || x.pp_size == 0 || x.pp_rank >= x.pp_size)
    return "rank tp" + std::to_string(x.tp_rank) + " pp" + std::to_string(x.pp_rank) +
           " outside tp_size " + std::to_string(x.tp_size) + " x pp_size " +
           std::to_string(x.pp_size);
  if (!x.mla) {
    auto h = x.total_kv_heads;
    if (h % x.tp_size != 0 && x.tp_size % h != 0)
      return "total_kv_heads " + std::to_string(h) + " over tp_size " + std::to_string(x.tp_size) +
             ", expected one to divide the other";
    if (x.kv_heads != heads_per_rank(h, x.tp_size))
      return "kv_heads " + std::to_string(x.kv_heads) + " on a rank of tp_size " +
             std::to_string(x.tp_size) + ", expected " +
             std::to_string(heads_per_rank(h, x.tp_size)) + " of the model's " + std::to_string(h);
  }
  auto per_layer = x.mla ? 1u : 2u;
  auto want = x.layer_ids.size() * per_layer;
  if (x.kv_buffers.size() != want)
    return std::to_string(x.kv_buffers.size()) + " kv buffers, expected " + std::to_string(want) +
           " (" + std::to_string(x.layer_ids.size()) + " layers x " + (x.mla ? "1 latent" : "K,V") +
           ")";
  // Within the caps: page_size x kv_heads x head_dim x 4 B < 2^46, no overflow.
  auto item = uint64_t{x.page_size} * x.token_bytes();
  for (size_t i = 0; i < x.kv_buffers.size(); ++i) {
    auto& b = x.kv_buffers[i];
    if (auto m = wraps("kv buffer " + std::to_string(i), b))
      return m;
    if (b.item_len != item)
      return "kv buffer " + std::to_string(i) + " item_len " + std::to_string(b.item_len) +
             ", expected " + std::to_string(item) + " (page_size " + std::to_string(x.page_size) +
             " x kv_heads " + std::to_string(x.kv_heads) + " x head_dim " +
             std::to_string(x.head_dim) + " x " + std::to_string(dtype_size(x.dtype)) + " B)";
    if (b.capacity() == 0)
      return "kv buffer " + std::to_string(i) + " length " + std::to_string(b.length) +
             " holds no page of " + std::to_string(b.item_len) + " B";
  }
  for (size_t i = 0; i < x.aux_buffers.size(); ++i) {
    auto& a = x.aux_buffers[i];
    if (auto m = wraps("aux buffer " + std::to_string(i), a))
      return m;
    if (a.item_len == 0 || a.capacity() == 0)
      return "aux buffer " + std::to_string(i) + " item_len " + std::to_string(a.item_len) +
             " length " + std::to_string(a.length) + ", expected at least one row";
  }
  for (size_t i = 0; i < x.states.size(); ++i) {
    auto& st = x.states[i];
    if (st.buffers.empty())
      return "state component " + std::to_string(i) + " has no buffer";
    for (auto& b : st.buffers) {
      if (auto m = wraps("state component " + std::to_string(i) + " buffer", b))
        return m;
      if (b.item_len == 0 || b.capacity() == 0)
        return "state component " + std::to_string(i) + " buffer item_len " +
               std::to_string(b.item_len) + " length " + std::to_string(b.length) +
               ", expected at least one item";
    }
  }
  if (!x.aux_buffers.empty() && x.aux_buffers.front().item_len < room_stamp_bytes)
    return "aux buffer 0 item_len " + std::to_string(x.aux_buffers.front().item_len) +
           ", expected at least " + std::to_string(room_stamp_bytes) + " B for the room stamp";
  return std::nullopt;
}

std::optional<std::string> check_aux_slot(const kv_layout& x, uint32_t slot) {
  if (x.aux_buffers.empty()) {
    if (slot != no_aux_slot)
      return "aux_slot " + std::to_string(slot) + " given, but the rank has no aux buffers";
    return std::nullopt;
  }
  if (slot >= x.aux_capacity())
    return "aux_slot " + (slot == no_aux_slot ? std::string{"none"} : std::to_string(slot)) +
           " out of range, the aux buffers hold " + std::to_string(x.aux_capacity()) + " rows";
  return std::nullopt;
}

std::optional<std::string> check_state_indices(const kv_layout& layout,
                                               const std::vector<std::vector<uint32_t>>& states) {
  if (states.size() != layout.states.size())
    return std::to_string(states.size()) + " state index lists for " +
           std::to_string(layout.states.size()) + " state components";
  for (size_t c = 0; c < states.size(); ++c) {
    auto name =
        "state component " + std::to_string(c) + " (" + to_string(layout.states[c].kind) + ")";
    if (layout.states[c].kind == state_kind::single_slot && states[c].size() != 1)
      return name + ": " + std::to_string(states[c].size()) + " indices, expected one";
    auto cap = layout.state_capacity(c);
    for (auto i : states[c])
      if (i >= cap)
        return name + ": index " + std::to_string(i) + " out of range, it holds " +
               std::to_string(cap) + " items";
  }
  return std::nullopt;
}

std::optional<std::string> compare(const kv_layout& p, const kv_layout& d) {
  if (auto m = differ("protocol_version", p.version, d.version))
    return m;
  if (auto m = differ("page_size", p.page_size, d.page_size))
    return m;
  if (p.dtype != d.dtype)
    return "kv dtype prefill=" + to_string(p.dtype) + " decode=" + to_string(d.dtype);
  if (p.mla != d.mla)
    return std::string{"attention prefill="} + (p.mla ? "MLA" : "MHA") +
           " decode=" + (d.mla ? "MLA" : "MHA");
  if (auto m = differ("total_kv_heads", p.total_kv_heads, d.total_kv_heads))
    return m;
  if (auto m = differ("head_dim", p.head_dim, d.head_dim))
    return m;
  if (p.tp_size == d.tp_size)
    if (auto m = differ("kv_heads per rank", p.kv_heads, d.kv_heads))
      return m;
  if (auto m = differ("aux buffer count", p.aux_buffers.size(), d.aux_buffers.size()))
    return m;
  for (size_t i = 0; i < p.aux_buffers.size(); ++i)
    if (auto m = differ("aux buffer " + std::to_string(i) + " item_len", p.aux_buffers[i].item_len,
                        d.aux_buffers[i].item_len))
      return m;
  return std::nullopt;
}

}  // namespace kvferry
