// Layouts out of fuzz bytes, shared by the layout and the planner harnesses.
//
// The bytes are read as fields, in kv_layout's order. A small number takes one
// byte (0..0xEF); a tag byte 0xF0..0xFF is followed by a raw little-endian
// u32 or u64, so every value is reachable and the usual ones are cheap. A
// flags byte per layout lets the input ask for fields derived the way a real
// rank derives them (its heads from the TP size, item_len from the page
// geometry, two buffers per layer), so that mutations reach the code past
// validate() instead of all failing its first checks. Past the end, every
// read gives 0. Lists are bounded here (a peer's list is bounded by the
// message that carries it, not by kvferry) but above every cap of
// messages/layout.hpp, so the caps themselves are exercised.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "messages/layout.hpp"

namespace kvferry::fuzz {

/// Reads fields off the input; 0 past its end.
class byte_reader {
 public:
  byte_reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  bool done() const { return pos_ >= size_; }

  uint8_t u8() { return pos_ < size_ ? data_[pos_++] : 0; }

  uint64_t raw(size_t bytes) {
    uint64_t v = 0;
    for (size_t i = 0; i < bytes; ++i)
      v |= uint64_t{u8()} << (8 * i);
    return v;
  }

  /// One byte below 0xF0, or a tag and a raw u32.
  uint32_t n32() {
    auto tag = u8();
    return tag < 0xF0 ? tag : static_cast<uint32_t>(raw(4));
  }

  /// One byte below 0xF0, or a tag and a raw u64.
  uint64_t n64() {
    auto tag = u8();
    return tag < 0xF0 ? tag : raw(8);
  }

  /// A count, at most `most`.
  size_t count(size_t most) {
    auto n = n32();
    return n > most ? most : n;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

/// Flags of a decoded layout.
enum layout_flags : uint8_t {
  lf_mla = 1,         ///< MLA attention
  lf_heads = 2,       ///< kv_heads = heads_per_rank(total, tp_size) (1 with MLA)
  lf_item_len = 4,    ///< kv item_len = page_size x token bytes; lengths in pages
  lf_buffers = 8,     ///< kv buffer count = layers x (MLA ? 1 : 2)
  lf_version = 16,    ///< read the protocol version (else the current one)
  lf_layer_run = 32,  ///< layer ids first, first+1, ... (else each read)
  lf_aux_stamp = 64,  ///< aux item_len at least the room stamp
};

/// Bounds of the decoder: above the caps, below what a harness run can hold.
constexpr size_t most_layers = max_layers + 8;
constexpr size_t most_buffers = 2 * most_layers;
constexpr size_t most_aux = max_aux_buffers + 4;
constexpr size_t most_states = max_states + 4;
constexpr size_t most_state_buffers = 16;

inline buffer_desc read_buffer(byte_reader& in, uint64_t item_len, bool in_items) {
  buffer_desc b;
  b.region = in.n32();
  b.offset = in.n64();
  if (item_len == 0)
    item_len = in.n64();
  b.item_len = item_len;
  b.length = in_items ? in.n64() * item_len : in.n64();  // wraps like a peer's value may
  return b;
}

/// A layout out of the input (see the top of the file).
inline kv_layout read_layout(byte_reader& in) {
  kv_layout l;
  auto flags = in.u8();
  l.mla = flags & lf_mla;
  if (flags & lf_version)
    l.version = in.n32();
  l.page_size = in.n32();
  l.dtype = static_cast<kv_dtype>(in.u8() % 8);  // 6, 7: not a dtype
  auto layers = in.count(most_layers);
  auto first = in.n32();
  for (size_t i = 0; i < layers; ++i)
    l.layer_ids.push_back((flags & lf_layer_run) ? first + static_cast<uint32_t>(i) : in.n32());
  l.total_kv_heads = in.n32();
  l.head_dim = in.n32();
  l.tp_size = in.n32();
  l.tp_rank = in.n32();
  l.pp_size = in.n32();
  l.pp_rank = in.n32();
  if (flags & lf_heads)
    l.kv_heads = l.mla ? 1 : heads_per_rank(l.total_kv_heads, l.tp_size);
  else
    l.kv_heads = in.n32();
  auto buffers =
      (flags & lf_buffers) ? l.layer_ids.size() * (l.mla ? 1 : 2) : in.count(most_buffers);
  uint64_t item = (flags & lf_item_len) ? uint64_t{l.page_size} * l.token_bytes() : 0;
  for (size_t i = 0; i < buffers; ++i)
    l.kv_buffers.push_back(read_buffer(in, item, flags & lf_item_len));
  auto aux = in.count(most_aux);
  for (size_t i = 0; i < aux; ++i) {
    auto b = read_buffer(in, 0, true);
    if ((flags & lf_aux_stamp) && b.item_len < room_stamp_bytes) {
      b.length = b.item_len == 0 ? 0 : b.length / b.item_len * room_stamp_bytes;
      b.item_len = room_stamp_bytes;
    }
    l.aux_buffers.push_back(b);
  }
  auto states = in.count(most_states);
  for (size_t i = 0; i < states; ++i) {
    state_desc st;
    st.kind = static_cast<state_kind>(in.u8() % 3);  // 2: not a kind
    auto n = in.count(most_state_buffers);
    for (size_t j = 0; j < n; ++j)
      st.buffers.push_back(read_buffer(in, 0, true));
    l.states.push_back(std::move(st));
  }
  return l;
}

/// A second layout that shares the first's model (what a paired peer
/// shares: version, page size, dtype, heads, head width, attention kind,
/// aux item lengths) and reads its own place, layers and buffers.
inline kv_layout read_peer_layout(byte_reader& in, const kv_layout& model) {
  kv_layout l;
  auto flags = in.u8();
  l.version = model.version;
  l.mla = model.mla;
  l.page_size = model.page_size;
  l.dtype = model.dtype;
  l.total_kv_heads = model.total_kv_heads;
  l.head_dim = model.head_dim;
  l.tp_size = in.n32();
  l.tp_rank = in.n32();
  l.pp_size = in.n32();
  l.pp_rank = in.n32();
  l.kv_heads = l.mla ? 1 : heads_per_rank(l.total_kv_heads, l.tp_size);
  if (flags & lf_layer_run) {
    l.layer_ids = model.layer_ids;  // all of the model's layers (a decode rank of PP 1)
  } else {
    auto layers = in.count(most_layers);
    for (size_t i = 0; i < layers; ++i)
      l.layer_ids.push_back(in.n32());
  }
  uint64_t item = uint64_t{l.page_size} * l.token_bytes();
  auto buffers = l.layer_ids.size() * (l.mla ? 1 : 2);
  for (size_t i = 0; i < buffers; ++i)
    l.kv_buffers.push_back(read_buffer(in, item, true));
  for (auto& a : model.aux_buffers)
    l.aux_buffers.push_back(read_buffer(in, a.item_len, true));
  if (flags & lf_heads)
    l.states = model.states;
  return l;
}

/// Index lists for a layout's state components (as many lists as it has
/// components, unless the input asks for another number).
inline std::vector<std::vector<uint32_t>> read_state_indices(byte_reader& in, const kv_layout& l) {
  std::vector<std::vector<uint32_t>> out(l.states.size());
  if (in.u8() == 0xEE)
    out.resize(in.count(8));
  for (auto& list : out) {
    auto n = in.count(8);
    for (size_t i = 0; i < n; ++i)
      list.push_back(in.n32());
  }
  return out;
}

}  // namespace kvferry::fuzz
