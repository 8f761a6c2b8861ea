// Which prefill ranks a decode rank receives from, and which heads each one
// writes: the TP and PP mapping of SGLang's §4.5-§4.6, as pure functions.
//
//   equal TP    decode r ← prefill r
//   fan-out     d > p: decode r ← prefill r / (d/p); the prefill rank serves d/p decode ranks
//   fan-in      d < p: decode r ← prefill [r·k, (r+1)·k), k = p/d; MLA: the first writes, the
//               others are dummies that still conclude; MHA: each distinct head range writes once
//   PP          decode PP = prefill PP: stage to stage; decode PP 1: every prefill stage
//               writes its own layers (paired by layer id)
//
// A rank of tp_size T holds heads [t·H/T, (t+1)·H/T) of the model's H, or, with
// fewer heads than ranks, the one head t / (T/H) (replicated: integer
// division, never modulo). A source writes the intersection of its heads and
// its destination's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "messages/failure.hpp"
#include "messages/layout.hpp"

namespace kvferry {

/// TP x PP of an instance.
struct instance_size {
  uint32_t tp = 1;
  uint32_t pp = 1;
  friend bool operator==(const instance_size&, const instance_size&) = default;
};

/// A prefill rank a decode rank receives from.
struct source {
  uint32_t tp = 0;
  uint32_t pp = 0;
  bool dummy = false;       ///< takes part in the room, writes nothing
  bool writes_aux = false;  ///< the one source that writes the aux row and the states
  friend bool operator==(const source&, const source&) = default;
};

/// A run of heads.
struct head_range {
  uint32_t first = 0;
  uint32_t count = 0;
};

/// Heads held by rank `tp_rank` of `tp_size` (MLA: the one latent, head 0).
head_range heads_of(uint32_t total_heads, uint32_t tp_size, uint32_t tp_rank, bool mla);

/// What a source writes into a destination, in heads of each side's token row.
struct head_slice {
  uint32_t src_head_start = 0;
  uint32_t dst_head_start = 0;
  uint32_t n_heads = 0;  ///< 0: the two ranks share no head
};

/// The heads rank (p_tp of p) writes into rank (d_tp of d).
head_slice slice_of(uint32_t total_heads, uint32_t p, uint32_t p_tp, uint32_t d, uint32_t d_tp,
                    bool mla);

/// Whether two instances can pair at all (and every size within the caps of
/// messages/layout.hpp); the problem names both sizes.
std::optional<std::string> check_sizes(instance_size prefill, instance_size decode);

/// The sources of decode rank (tp, pp), in (pp, tp) order. check_sizes() must pass.
std::vector<source> sources_of(instance_size prefill, instance_size decode, uint32_t tp,
                               uint32_t pp, bool mla, uint32_t total_heads);

/// How many decode ranks name prefill rank (tp, pp) as a source, dummy or not:
/// the requests it waits for before it is WaitingForInput.
uint32_t destinations_of(instance_size prefill, instance_size decode, uint32_t tp, uint32_t pp,
                         bool mla, uint32_t total_heads);

/// Why two ranks cannot pair: a layout field that differs (layout_mismatch,
/// "layout mismatch: page_size prefill=16 decode=64"), or a combination this
/// build does not move (unsupported).
struct pairing_refusal {
  errc code = errc::layout_mismatch;
  std::string cause;
};

/// Checks that a prefill rank's layout can feed a decode rank's: the sizes,
/// compare(), the layers (every prefill layer is one the decode rank holds;
/// with equal PP the same layers), and the state components (equal TP and PP
/// only: no slicing rule is given for them). Names both values.
std::optional<pairing_refusal> check_pairing(const kv_layout& prefill, const kv_layout& decode);

}  // namespace kvferry
