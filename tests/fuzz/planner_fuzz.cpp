// Fuzz harness: the transfer planner's inputs (actors/plan/planner.cpp:
// plan_kv, plan_aux, plan_states; actors/plan/staging_plan.cpp: plan_gather,
// plan_scatter, staged_bytes, segments_by_buffer). The input is a prefill and
// a decode layout (fuzz_layout.hpp), page lists, aux rows, state indices and
// a write size limit. As on a rank, nothing is planned for two layouts that
// check_pairing() refuses.
//
// Invariants (a broken one aborts: a finding):
//   - every write of a plan lies inside one KV (aux, state) buffer of the
//     source and one of the destination: a page list from a peer never
//     makes a rank write outside the buffers both layouts declare;
//   - a plan's bytes are the sum of its writes, and what the page lists ask
//     for (pages x pairs x the shared heads' bytes), none truncated;
//   - no write exceeds the size limit;
//   - a staged block is gathered and scattered whole: its copies stay inside
//     the block and the pool, and add up to staged_bytes().
#include <algorithm>
#include <span>

#include "actors/plan/planner.hpp"
#include "actors/plan/staging_plan.hpp"
#include "actors/plan/tp_mapping.hpp"
#include "tests/fuzz/fuzz_layout.hpp"
#include "tests/fuzz/fuzz_main.hpp"

using namespace kvferry;

namespace {

/// Whether [offset, offset + length) lies inside a buffer of `buffers` in `region`.
bool inside(const std::vector<buffer_desc>& buffers, uint32_t region, uint64_t offset,
            uint64_t length) {
  return std::any_of(buffers.begin(), buffers.end(), [&](const buffer_desc& b) {
    return b.region == region && offset >= b.offset && length <= b.length &&
           offset - b.offset <= b.length - length;
  });
}

std::vector<buffer_desc> all_buffers(const kv_layout& l) {
  auto out = l.kv_buffers;
  out.insert(out.end(), l.aux_buffers.begin(), l.aux_buffers.end());
  for (auto& st : l.states)
    out.insert(out.end(), st.buffers.begin(), st.buffers.end());
  return out;
}

void check_writes(const write_plan& plan, const kv_layout& src, const kv_layout& dst,
                  uint64_t max_write) {
  auto s = all_buffers(src);
  auto d = all_buffers(dst);
  uint64_t sum = 0;
  for (auto& op : plan.ops) {
    fuzz_check(op.length > 0, "no empty write");
    fuzz_check(op.length <= max_write, "a write within the size limit");
    fuzz_check(inside(s, op.local, op.local_offset, op.length), "a write from a source buffer");
    fuzz_check(inside(d, op.remote, op.remote_offset, op.length),
               "a write into a destination "
               "buffer");
    sum += op.length;
  }
  fuzz_check(sum == plan.bytes, "a plan's bytes are its writes");
}

void check_copies(const std::vector<staged_copy>& copies, const kv_layout& side, uint64_t block) {
  for (auto& c : copies) {
    fuzz_check(c.buffer < side.kv_buffers.size(), "a copy names a buffer of its side");
    auto& b = side.kv_buffers[c.buffer];
    fuzz_check(c.length <= b.length && c.pool_offset <= b.length - c.length,
               "a copy inside its KV buffer");
    fuzz_check(c.length <= block && c.staged_offset <= block - c.length,
               "a copy inside the staged block");
  }
  fuzz_check(copied_bytes(copies) == block, "a staged block is copied whole");
  segments_by_buffer(copies, side.kv_buffers.size(), 0, true);
}

std::vector<uint32_t> read_pages(fuzz::byte_reader& in, size_t n) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < n; ++i)
    out.push_back(in.n32());
  return out;
}

}  // namespace

int kvferry_fuzz_one(const uint8_t* data, size_t size) {
  fuzz::byte_reader in{data, size};
  auto shared = in.u8() & 1;
  auto src = fuzz::read_layout(in);
  auto dst = shared ? fuzz::read_peer_layout(in, src) : fuzz::read_layout(in);
  if (check_pairing(src, dst))
    return 0;  // a rank plans nothing for a decode rank it refused
  auto n = in.count(64);
  auto src_pages = read_pages(in, n);
  auto dst_pages = read_pages(in, in.u8() == 0xEE ? in.count(64) : n);
  auto max_write = in.n64();
  auto geometry = geometry_of(src, dst);
  // The per-token path makes page_size writes per page and buffer pair: keep
  // one run short (a rank's own page lists are as long as its chunks).
  if (geometry.ok() && geometry->pairs.size() * n * (geometry->whole ? 1 : src.page_size) > 200000)
    return 0;

  auto plan = plan_kv(src, dst, src_pages, dst_pages, max_write);
  if (plan.ok()) {
    fuzz_check(geometry.ok(), "a plan has a geometry");
    check_writes(*plan, src, dst, max_write == 0 ? UINT64_MAX : max_write);
    auto per_page = uint64_t{src.page_size} * geometry->slice_bytes;  // whole: item_len
    fuzz_check(plan->bytes == geometry->pairs.size() * n * per_page, "no page truncated");
  } else {
    fuzz_check(!plan.error().message().empty(), "a refusal says why");
  }

  write_plan extra;
  auto src_slot = in.n32();
  auto dst_slot = in.n32();
  if (plan_aux(extra, src, dst, src_slot, dst_slot).ok())
    check_writes(extra, src, dst, UINT64_MAX);
  auto src_states = fuzz::read_state_indices(in, src);
  auto dst_states = fuzz::read_state_indices(in, dst);
  write_plan states;
  if (plan_states(states, src, dst, src_states, dst_states).ok())
    check_writes(states, src, dst, UINT64_MAX);

  if (staging_applies(src, dst) && src_pages.size() == dst_pages.size()) {
    auto block = staged_bytes(src, dst, n);
    auto gather = plan_gather(src, dst, src_pages);
    if (gather.ok())
      check_copies(*gather, src, block);
    auto scatter = plan_scatter(src, dst, dst_pages);
    if (scatter.ok())
      check_copies(*scatter, dst, block);
  }
  return 0;
}
