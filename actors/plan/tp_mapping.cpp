#include "actors/plan/tp_mapping.hpp"

#include <algorithm>
#include <optional>
#include <utility>

namespace kvferry {

head_range heads_of(uint32_t total_heads, uint32_t tp_size, uint32_t tp_rank, bool mla) {
  if (mla || total_heads == 0 || tp_size == 0)
    return {0, 1};
  if (total_heads >= tp_size) {
    auto n = total_heads / tp_size;
    return {tp_rank * n, n};
  }
  // Fewer heads than ranks: each head is replicated on tp_size / H ranks.
  return {tp_rank / (tp_size / total_heads), 1};
}

head_slice slice_of(uint32_t total_heads, uint32_t p, uint32_t p_tp, uint32_t d, uint32_t d_tp,
                    bool mla) {
  auto s = heads_of(total_heads, p, p_tp, mla);
  auto t = heads_of(total_heads, d, d_tp, mla);
  auto lo = std::max(s.first, t.first);
  auto hi = std::min(s.first + s.count, t.first + t.count);
  if (lo >= hi)
    return {};
  return {lo - s.first, lo - t.first, hi - lo};
}

std::optional<std::string> check_sizes(instance_size p, instance_size d) {
  if (p.tp == 0 || d.tp == 0 || p.pp == 0 || d.pp == 0)
    return "prefill TP " + std::to_string(p.tp) + " x PP " + std::to_string(p.pp) +
           " with decode TP " + std::to_string(d.tp) + " x PP " + std::to_string(d.pp) +
           ": every size must be at least 1";
  // The caps of messages/layout.hpp: a size from a peer's topology must not
  // make sources_of() or destinations_of() loop ~2^32 times.
  for (auto [what, size] : {std::pair{"prefill", p}, std::pair{"decode", d}}) {
    if (size.tp > max_tp_size || size.pp > max_pp_size ||
        uint64_t{size.tp} * size.pp > max_instance_ranks)
      return std::string{what} + " TP " + std::to_string(size.tp) + " x PP " +
             std::to_string(size.pp) + " out of range, expected TP at most " +
             std::to_string(max_tp_size) + ", PP at most " + std::to_string(max_pp_size) +
             " and at most " + std::to_string(max_instance_ranks) + " ranks per instance";
  }
  if (p.tp % d.tp != 0 && d.tp % p.tp != 0)
    return "prefill TP " + std::to_string(p.tp) + " with decode TP " + std::to_string(d.tp) +
           ": one TP size must divide the other";
  if (d.pp != p.pp && d.pp != 1)
    return "decode PP " + std::to_string(d.pp) + " with prefill PP " + std::to_string(p.pp) +
           ": decode PP must equal prefill PP or be 1";
  return std::nullopt;
}

std::vector<source> sources_of(instance_size p, instance_size d, uint32_t tp, uint32_t pp, bool mla,
                               uint32_t total_heads) {
  std::vector<source> out;
  auto first_stage = d.pp == p.pp ? pp : 0;
  auto last_stage = d.pp == p.pp ? pp : p.pp - 1;
  for (auto stage = first_stage; stage <= last_stage; ++stage) {
    if (d.tp >= p.tp) {
      out.push_back({tp / (d.tp / p.tp), stage, false, false});
      continue;
    }
    // Fan-in: a group of k prefill ranks; each distinct head range (MLA: the
    // latent) is written once, by the first rank that holds it.
    auto k = p.tp / d.tp;
    // The first head grows with t (t·H/T, or t / (T/H) replicated), so a head
    // range already written is the previous one: no search over the group.
    std::optional<uint32_t> written;
    for (auto t = tp * k; t < (tp + 1) * k; ++t) {
      auto h = heads_of(total_heads, p.tp, t, mla).first;
      bool dummy = written == h;
      written = h;
      out.push_back({t, stage, dummy, false});
    }
  }
  // The output token comes from the last stage: its first writer sends the aux row.
  auto writer = std::find_if(out.begin(), out.end(),
                             [&](const source& s) { return !s.dummy && s.pp == last_stage; });
  if (writer != out.end())
    writer->writes_aux = true;
  return out;
}

uint32_t destinations_of(instance_size p, instance_size d, uint32_t tp, uint32_t pp, bool mla,
                         uint32_t total_heads) {
  uint32_t n = 0;
  for (uint32_t q = 0; q < d.pp; ++q)
    for (uint32_t r = 0; r < d.tp; ++r)
      for (auto& s : sources_of(p, d, r, q, mla, total_heads))
        n += s.tp == tp && s.pp == pp ? 1 : 0;
  return n;
}

std::optional<pairing_refusal> check_pairing(const kv_layout& p, const kv_layout& d) {
  auto unsupported = [](std::string why) {
    return pairing_refusal{errc::unsupported, std::move(why)};
  };
  auto mismatch = [](std::string why) {
    return pairing_refusal{errc::layout_mismatch, "layout mismatch: " + std::move(why)};
  };
  if (auto bad = check_sizes({p.tp_size, p.pp_size}, {d.tp_size, d.pp_size}))
    return unsupported(*bad);
  // The decode layout came off the wire: checked whole before any field of it
  // is used to index anything.
  if (auto bad = validate(d))
    return pairing_refusal{errc::invalid_argument, "the decode rank's layout: " + *bad};
  if (auto bad = validate(p))
    return pairing_refusal{errc::invalid_argument, "this prefill rank's layout: " + *bad};
  if (auto m = compare(p, d))
    return mismatch(*m);
  for (auto id : p.layer_ids)
    if (std::find(d.layer_ids.begin(), d.layer_ids.end(), id) == d.layer_ids.end())
      return mismatch("layer " + std::to_string(id) + " of prefill tp" + std::to_string(p.tp_rank) +
                      " pp" + std::to_string(p.pp_rank) +
                      " is not among the decode rank's layers " + format_ids(d.layer_ids));
  if (p.pp_size == d.pp_size && p.layer_ids != d.layer_ids)
    return mismatch("layer_ids prefill=" + format_ids(p.layer_ids) +
                    " decode=" + format_ids(d.layer_ids));
  if (!p.states.empty() && (p.tp_size != d.tp_size || p.pp_size != d.pp_size))
    return unsupported("state component 0 (" + to_string(p.states[0].kind) + ") with prefill TP " +
                       std::to_string(p.tp_size) + " x PP " + std::to_string(p.pp_size) +
                       " and decode TP " + std::to_string(d.tp_size) + " x PP " +
                       std::to_string(d.pp_size) +
                       ": state components need equal TP and PP (no slicing rule is given for "
                       "them)");
  for (auto id : p.layer_ids)
    for (bool value : {false, true}) {
      if (value && p.mla)
        continue;
      auto& s = p.kv_buffers.at(static_cast<size_t>(p.buffer_of(id, value)));
      auto& t = d.kv_buffers.at(static_cast<size_t>(d.buffer_of(id, value)));
      if (p.tp_size == d.tp_size && s.item_len != t.item_len)
        return mismatch(std::string{"layer "} + std::to_string(id) + (value ? " V" : " K") +
                        " item_len prefill=" + std::to_string(s.item_len) +
                        " decode=" + std::to_string(t.item_len));
    }
  auto src_heads = p.mla ? 1 : heads_per_rank(p.total_kv_heads, p.tp_size);
  auto dst_heads = d.mla ? 1 : heads_per_rank(d.total_kv_heads, d.tp_size);
  if (p.kv_heads != src_heads || d.kv_heads != dst_heads)
    return mismatch("kv_heads per rank prefill=" + std::to_string(p.kv_heads) +
                    " decode=" + std::to_string(d.kv_heads) + ", expected " +
                    std::to_string(src_heads) + " and " + std::to_string(dst_heads) + " for TP " +
                    std::to_string(p.tp_size) + " and " + std::to_string(d.tp_size));
  return std::nullopt;
}

}  // namespace kvferry
