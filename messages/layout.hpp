// The layout of one rank's KV pool, as its peers must know it: geometry (page
// size, dtype, layers, heads) and where every buffer lives in the rank's
// registered transport regions. Checked once, at handshake.
//
// Addressing: page p of KV buffer b lives at
//   (region b.region, offset b.offset + p * b.item_len), b.item_len bytes long.
// MHA/GQA: kv_buffers = [K of every layer..., V of every layer...].
// MLA:     kv_buffers = [latent of every layer...] (kv_heads = 1, head_dim = latent width).
// Aux row r of aux buffer a lives at a.offset + r * a.item_len; the first
// room_stamp_bytes of aux buffer 0's row belong to kvferry (the room stamp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <caf/meta/type_name.hpp>

namespace kvferry {

/// Version of the room protocol; both sides must speak the same one.
/// 2: room_request carries the decode side's prefix (prefix reuse).
constexpr uint32_t protocol_version = 2;

/// Bytes at the start of aux buffer 0's row that carry {room id, generation},
/// little-endian u64 each. Decode commits a room only if they match.
constexpr uint64_t room_stamp_bytes = 16;

/// Marks "no aux row" where an aux row index is expected.
constexpr uint32_t no_aux_slot = UINT32_MAX;

// -- caps on what a layout may declare ------------------------------------------
//
// A layout arrives from a peer (a registration, a decode rank's hello), and
// ranks loop over its sizes: a prefill rank counts its destinations over every
// decode rank (tp_size x pp_size), the mapping walks tp groups, the planner
// multiplies page_size, heads, head_dim and the dtype's size into byte counts.
// The caps keep every such loop short and every product far from 2^64
// (page_size x kv_heads x head_dim x 4 B < 2^46), while leaving ample room
// above any model served today (TP 8-64, PP up to 16, <= 128 kv heads,
// head_dim <= 576 for MLA's latent, page sizes 1-256 tokens, < 200 layers).

/// Largest TP size of an instance.
constexpr uint32_t max_tp_size = 1024;

/// Largest PP size of an instance.
constexpr uint32_t max_pp_size = 1024;

/// Largest number of ranks of one instance (tp_size x pp_size): a request
/// makes a prefill rank walk every decode rank of its destination instance.
constexpr uint32_t max_instance_ranks = 4096;

/// Largest page, in tokens (the sliced path writes one op per token).
constexpr uint32_t max_page_size = 1u << 16;

/// Most layers one rank may hold (pairing looks every layer up by id).
constexpr uint32_t max_layers = 4096;

/// Most kv heads of a model.
constexpr uint32_t max_kv_heads = 4096;

/// Largest head width, in elements.
constexpr uint32_t max_head_dim = 1u << 16;

/// Most aux buffers, state components, and buffers of one state component.
constexpr uint32_t max_aux_buffers = 64;
constexpr uint32_t max_states = 64;
constexpr uint32_t max_state_buffers = 2 * max_layers;

/// Element type of the KV cache.
enum class kv_dtype : uint8_t { f32 = 0, f16 = 1, bf16 = 2, fp8_e4m3 = 3, fp8_e5m2 = 4, int8 = 5 };

/// Bytes per element of `x`.
uint32_t dtype_size(kv_dtype x);

/// "bf16", "fp8_e4m3", ...
std::string to_string(kv_dtype x);

/// Parses the names of to_string(kv_dtype); nullopt for anything else.
std::optional<kv_dtype> parse_dtype(std::string_view name);

/// One buffer of a rank: a run of fixed-size items (pages or aux rows) inside
/// one registered region.
struct buffer_desc {
  uint32_t region = 0;    ///< transport region id, on the rank that owns the buffer
  uint64_t offset = 0;    ///< byte offset of item 0 inside the region
  uint64_t length = 0;    ///< bytes of the buffer
  uint64_t item_len = 0;  ///< bytes per item (page of KV, or aux row)

  /// Whole items that fit in the buffer.
  uint64_t capacity() const { return item_len == 0 ? 0 : length / item_len; }

  friend bool operator==(const buffer_desc&, const buffer_desc&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, buffer_desc& x) {
  return f(caf::meta::type_name("kvferry.buffer_desc"), x.region, x.offset, x.length, x.item_len);
}

/// How a state component beside the paged KV is indexed.
enum class state_kind : uint8_t {
  /// One slot per request (Mamba-like): one index on each side.
  single_slot = 0,
  /// Its own pages (sliding-window-like): a list of indices on each side.
  page_indexed = 1,
};

/// "single_slot", "page_indexed".
std::string to_string(state_kind x);

/// One state component: its buffers (one item per slot or page, per buffer).
struct state_desc {
  state_kind kind = state_kind::single_slot;
  std::vector<buffer_desc> buffers;

  friend bool operator==(const state_desc&, const state_desc&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, state_desc& x) {
  return f(caf::meta::type_name("kvferry.state_desc"), x.kind, x.buffers);
}

/// The layout of one rank's KV pool.
struct kv_layout {
  uint32_t version = protocol_version;
  uint32_t page_size = 0;  ///< tokens per page
  kv_dtype dtype = kv_dtype::bf16;
  std::vector<uint32_t> layer_ids;  ///< model layer ids held by this rank (its PP stage)
  uint32_t total_kv_heads = 0;      ///< kv heads of the model
  uint32_t kv_heads = 0;            ///< kv heads held by this rank
  uint32_t head_dim = 0;            ///< elements per head (MLA: latent width)
  bool mla = false;
  std::vector<buffer_desc> kv_buffers;
  std::vector<buffer_desc> aux_buffers;
  std::vector<state_desc> states;  ///< state components beside the paged KV, in order
  uint32_t tp_rank = 0;  ///< where the rank sits in its instance (compare() ignores these)
  uint32_t tp_size = 1;
  uint32_t pp_rank = 0;
  uint32_t pp_size = 1;

  /// Bytes of one token of one KV buffer on this rank.
  uint64_t token_bytes() const;

  /// Pages every KV buffer can hold (the minimum over buffers).
  uint64_t page_capacity() const;

  /// Aux rows every aux buffer can hold (0 without aux buffers).
  uint64_t aux_capacity() const;

  /// Slots (or pages) every buffer of state component `i` can hold.
  uint64_t state_capacity(size_t i) const;

  /// Index of the buffer of layer `layer_id` (`value`: the V buffer, MHA
  /// only); -1 if the rank does not hold the layer.
  int buffer_of(uint32_t layer_id, bool value) const;

  friend bool operator==(const kv_layout&, const kv_layout&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, kv_layout& x) {
  return f(caf::meta::type_name("kvferry.kv_layout"), x.version, x.page_size, x.dtype, x.layer_ids,
           x.total_kv_heads, x.kv_heads, x.head_dim, x.mla, x.kv_buffers, x.aux_buffers, x.states,
           x.tp_rank, x.tp_size, x.pp_rank, x.pp_size);
}

/// Checks that a rank's own layout is consistent, and every size within the
/// caps above (a layout from a peer is checked here before any field of it is
/// used). Returns the first problem, naming the field, its value and what was
/// expected (the range, for a cap), or nullopt.
std::optional<std::string> validate(const kv_layout& x);

/// Checks an aux row index against a layout: required (and in range) when the
/// layout has aux buffers, no_aux_slot otherwise. Returns the problem, naming
/// the value and the rows the buffers hold, or nullopt.
std::optional<std::string> check_aux_slot(const kv_layout& x, uint32_t slot);

/// Checks state indices against a layout: one list per state component, a
/// single-slot component takes exactly one index, every index inside its
/// buffers. Returns the problem, naming the values, or nullopt.
std::optional<std::string> check_state_indices(const kv_layout& layout,
                                               const std::vector<std::vector<uint32_t>>& states);

/// "[0,1,2]" (long lists shortened: "[0,1,...,60]").
std::string format_ids(const std::vector<uint32_t>& ids);

/// Kv heads a rank of `tp_size` holds for a model of `total_heads`: its share,
/// or 1 (replicated) when there are fewer heads than ranks.
uint32_t heads_per_rank(uint32_t total_heads, uint32_t tp_size);

/// Compares the fields of a prefill and a decode layout that must agree
/// whatever the TP and PP mapping: protocol, page size, dtype, attention kind,
/// model heads and head width, aux rows and state components; with equal TP
/// also the heads per rank. Returns the first field that differs, naming both
/// values ("page_size prefill=16 decode=64"), or nullopt. Which layers and
/// buffers pair is the mapping's business (actors/plan/tp_mapping.hpp).
std::optional<std::string> compare(const kv_layout& prefill, const kv_layout& decode);

}  // namespace kvferry
