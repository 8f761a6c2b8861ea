// How the tcp backend spreads one batch over the streams (connections) to a
// peer. Every remote byte has one stream, fixed by its address: the remote
// region is cut into granules of `stripe_granule` bytes and each granule
// belongs to one of the peer's streams. A batch is split at granule
// boundaries into one stripe per stream it touches; each stripe is sent as a
// batch of its own on its stream (same cookie), and the batch completes when
// every stripe was acknowledged.
//
// Why by address: two writes of the same byte — in one batch or in two —
// always travel on the same stream, and a stream is a FIFO placed in order
// by one receiver thread, so the later write lands after the earlier one
// without any wait between batches. Writes to different bytes may land in
// any order in real time; what callers can see (completions, in post order,
// each one after every byte of its batch and of earlier batches landed, and
// the final bytes) is as with one stream. See tcp_sender.hpp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "transport/write_op.hpp"

namespace kvferry::transport::tcp {

/// Remote bytes per granule. A 128 KiB KV page aligned on it is never split.
constexpr uint64_t stripe_granule = 128 << 10;

/// The stream (0..streams-1) that carries the remote byte at `offset` of
/// `region`. Consecutive granules rotate over the streams (a long write is
/// spread evenly); each block of `streams` granules starts at a rotation
/// drawn from a hash of the block, so strided writes (every other page) do not
/// pile onto a few streams.
inline uint32_t stream_of(region_id region, uint64_t offset, uint32_t streams) {
  if (streams <= 1)
    return 0;
  uint64_t g = offset / stripe_granule;
  uint64_t h = (uint64_t{region} << 40) ^ (g / streams);
  // splitmix64's finaliser
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
  h ^= h >> 31;
  return static_cast<uint32_t>((g + h) % streams);
}

/// Appends `op` to `ops`, merged into the last op when both sides continue it
/// (a coalesced run is one op header and one iovec).
inline void append_coalesced(std::vector<write_op>& ops, const write_op& op) {
  if (!ops.empty() && op.length > 0) {
    auto& last = ops.back();
    if (last.length > 0 && last.local == op.local && last.remote == op.remote &&
        last.local_offset + last.length == op.local_offset &&
        last.remote_offset + last.length == op.remote_offset) {
      last.length += op.length;
      return;
    }
  }
  ops.push_back(op);
}

/// Splits `ops` into one op list per stream (`streams` lists, empty where the
/// batch has nothing), each in the batch's order, with adjacent runs
/// coalesced. An op whose remote end overflows is kept whole (the receiver
/// refuses it). A zero-length op goes to the stream of its offset.
inline std::vector<std::vector<write_op>> split_batch(const std::vector<write_op>& ops,
                                                      uint32_t streams) {
  std::vector<std::vector<write_op>> out(streams == 0 ? 1 : streams);
  for (auto& op : ops) {
    if (out.size() == 1 || op.length == 0 || op.remote_offset > UINT64_MAX - op.length) {
      append_coalesced(out[stream_of(op.remote, op.remote_offset, streams)], op);
      continue;
    }
    uint64_t done = 0;
    while (done < op.length) {
      uint64_t at = op.remote_offset + done;
      uint64_t len = std::min(op.length - done, stripe_granule - at % stripe_granule);
      append_coalesced(out[stream_of(op.remote, at, streams)],
                       write_op{op.local, op.local_offset + done, op.remote, at, len});
      done += len;
    }
  }
  return out;
}

}  // namespace kvferry::transport::tcp
