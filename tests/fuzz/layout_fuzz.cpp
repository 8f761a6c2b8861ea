// Fuzz harness: layout validation and pairing, as a rank runs them on a
// peer's layout at handshake (messages/layout.cpp: validate, compare,
// check_aux_slot, check_state_indices; actors/plan/tp_mapping.cpp:
// check_pairing, check_sizes, sources_of, destinations_of). The input is two
// layouts (fuzz_layout.hpp), the second either read whole or sharing the
// first's model, then an aux slot and state indices for the second.
//
// Invariants (a broken one aborts: a finding):
//   - a layout validate() accepts is within every cap of messages/layout.hpp,
//     and its buffers and indexing agree (buffer_of inside kv_buffers, pages
//     of its item length fit in every buffer);
//   - check_pairing() accepts only two layouts that validate and compare
//     equal, whose sizes check_sizes() accepts;
//   - the mapping of accepted sizes stays inside the prefill instance, and
//     every source that writes shares a head with its decode rank.
#include <algorithm>

#include "actors/plan/tp_mapping.hpp"
#include "messages/layout.hpp"
#include "tests/fuzz/fuzz_layout.hpp"
#include "tests/fuzz/fuzz_main.hpp"

using namespace kvferry;

namespace {

void check_valid(const kv_layout& l) {
  fuzz_check(l.tp_size >= 1 && l.tp_size <= max_tp_size, "tp_size within the cap");
  fuzz_check(l.pp_size >= 1 && l.pp_size <= max_pp_size, "pp_size within the cap");
  fuzz_check(uint64_t{l.tp_size} * l.pp_size <= max_instance_ranks, "ranks within the cap");
  fuzz_check(l.tp_rank < l.tp_size && l.pp_rank < l.pp_size, "rank inside its sizes");
  fuzz_check(l.page_size >= 1 && l.page_size <= max_page_size, "page_size within the cap");
  fuzz_check(l.kv_heads >= 1 && l.kv_heads <= l.total_kv_heads, "heads held within the model's");
  fuzz_check(l.total_kv_heads <= max_kv_heads && l.head_dim <= max_head_dim, "heads within caps");
  fuzz_check(!l.layer_ids.empty() && l.layer_ids.size() <= max_layers, "layers within the cap");
  fuzz_check(l.page_capacity() >= 1, "at least one page");
  auto item = uint64_t{l.page_size} * l.token_bytes();
  for (auto& b : l.kv_buffers) {
    fuzz_check(b.item_len == item, "kv item_len is the page geometry");
    fuzz_check(b.offset + b.length >= b.offset, "buffer bytes do not wrap");
  }
  for (auto id : l.layer_ids)
    for (bool value : {false, true}) {
      if (value && l.mla)
        continue;
      auto i = l.buffer_of(id, value);
      fuzz_check(i >= 0 && static_cast<size_t>(i) < l.kv_buffers.size(), "buffer_of in range");
    }
  fuzz_check(!check_aux_slot(l, l.aux_buffers.empty() ? no_aux_slot : 0), "row 0 is a slot");
}

void check_mapping(const kv_layout& p, const kv_layout& d) {
  instance_size ps{p.tp_size, p.pp_size};
  instance_size ds{d.tp_size, d.pp_size};
  if (check_sizes(ps, ds))
    return;
  auto sources = sources_of(ps, ds, d.tp_rank, d.pp_rank, p.mla, p.total_kv_heads);
  fuzz_check(!sources.empty(), "a decode rank has a source");
  fuzz_check(
      std::count_if(sources.begin(), sources.end(), [](auto& s) { return s.writes_aux; }) == 1,
      "one source writes the aux row");
  for (auto& s : sources) {
    fuzz_check(s.tp < p.tp_size && s.pp < p.pp_size, "a source inside the prefill instance");
    if (!s.dummy)
      fuzz_check(
          slice_of(p.total_kv_heads, p.tp_size, s.tp, d.tp_size, d.tp_rank, p.mla).n_heads > 0,
          "a writing source shares a head with its decode rank");
  }
  auto n = destinations_of(ps, ds, p.tp_rank, p.pp_rank, p.mla, p.total_kv_heads);
  fuzz_check(n <= uint64_t{d.tp_size} * d.pp_size, "destinations within the decode instance");
}

}  // namespace

int kvferry_fuzz_one(const uint8_t* data, size_t size) {
  fuzz::byte_reader in{data, size};
  auto shared = in.u8() & 1;
  auto p = fuzz::read_layout(in);
  auto d = shared ? fuzz::read_peer_layout(in, p) : fuzz::read_layout(in);
  auto p_bad = validate(p);
  auto d_bad = validate(d);
  if (!p_bad)
    check_valid(p);
  if (!d_bad)
    check_valid(d);
  auto differs = compare(p, d);
  auto refusal = check_pairing(p, d);
  if (!refusal) {
    fuzz_check(!p_bad && !d_bad, "a paired layout validates");
    fuzz_check(!differs, "paired layouts compare equal");
    fuzz_check(!check_sizes({p.tp_size, p.pp_size}, {d.tp_size, d.pp_size}), "sizes that map");
    for (auto id : p.layer_ids)
      fuzz_check(d.buffer_of(id, false) >= 0, "a paired layer is held by the decode rank");
  } else {
    fuzz_check(!refusal->cause.empty(), "a refusal says why");
  }
  if (!p_bad && !d_bad)
    check_mapping(p, d);
  if (!d_bad) {
    auto slot = in.n32();
    if (!check_aux_slot(d, slot))
      fuzz_check(d.aux_buffers.empty() ? slot == no_aux_slot : slot < d.aux_capacity(),
                 "an accepted aux slot is a row");
    auto indices = fuzz::read_state_indices(in, d);
    if (!check_state_indices(d, indices))
      for (size_t c = 0; c < indices.size(); ++c)
        for (auto i : indices[c])
          fuzz_check(i < d.state_capacity(c), "an accepted state index is an item");
  }
  format_ids(p.layer_ids);
  return 0;
}
