#include "actors/rank/decode_room.hpp"

#include <algorithm>
#include <unordered_set>

#include "actors/plan/kv_digest.hpp"

namespace kvferry {

decode_room::decode_room(uint64_t id, room_slot_ptr slot, std::string peer, const rank_ref& self,
                         const kv_layout& local, const deadlines& limits)
    : key_{id, 0},
      slot_(std::move(slot)),
      peer_(std::move(peer)),
      self_(self),
      local_(local),
      fsm_(limits) {}

std::optional<failure> decode_room::init(std::vector<uint32_t> dst_pages, uint32_t aux_slot,
                                         std::vector<std::vector<uint32_t>> states,
                                         uint32_t prefix_tokens) {
  if (initialized_)
    return make(errc::invalid_argument, "init called twice for " + to_string(key_));
  auto cap = local_.page_capacity();
  std::unordered_set<uint32_t> seen;
  seen.reserve(dst_pages.size());
  for (size_t i = 0; i < dst_pages.size(); ++i) {
    if (dst_pages[i] >= cap)
      return make(errc::invalid_pages, "destination page " + std::to_string(dst_pages[i]) +
                                           " at position " + std::to_string(i) +
                                           " out of range, the decode pool holds " +
                                           std::to_string(cap) + " pages");
    if (!seen.insert(dst_pages[i]).second)
      return make(errc::invalid_pages, "destination page " + std::to_string(dst_pages[i]) +
                                           " given twice (again at position " + std::to_string(i) +
                                           "), expected distinct pages");
  }
  if (auto bad = check_aux_slot(local_, aux_slot))
    return make(errc::invalid_argument, *bad);
  if (auto bad = check_state_indices(local_, states))
    return make(errc::invalid_argument, *bad);
  dst_pages_ = std::move(dst_pages);
  aux_slot_ = aux_slot;
  states_ = std::move(states);
  prefix_tokens_ = prefix_tokens;
  initialized_ = true;
  fsm_.touch();
  return std::nullopt;
}

std::optional<failure> decode_room::landed(const chunk_landed& msg) {
  auto src = std::find_if(sources_.begin(), sources_.end(),
                          [&](const room_source& s) { return s.rank == msg.prefill_rank; });
  if (src == sources_.end() || src->dummy)
    return make(errc::invalid_chunk, "chunk " + std::to_string(msg.chunk) + " of " +
                                         to_string(key_) + " from " + to_string(msg.prefill_rank) +
                                         ", which is not a writing source of the room");
  if (std::find(done_.begin(), done_.end(), msg.prefill_rank) != done_.end())
    return make(errc::invalid_chunk, "chunk " + std::to_string(msg.chunk) + " of " +
                                         to_string(key_) + " from " + to_string(msg.prefill_rank) +
                                         " after its last chunk");
  bytes_ += msg.bytes;
  if (msg.last)
    done_.push_back(msg.prefill_rank);
  fsm_.advance(kv_poll::transferring);
  fsm_.touch();
  return std::nullopt;
}

std::optional<failure> decode_room::check_digests(const chunk_landed& msg,
                                                  std::span<std::byte* const> bases) const {
  auto src = std::find_if(sources_.begin(), sources_.end(),
                          [&](const room_source& s) { return s.rank == msg.prefill_rank; });
  if (src == sources_.end())
    return std::nullopt;  // landed() refuses it
  auto end = uint64_t{msg.first_page} + msg.pages;
  if (end > dst_pages_.size())
    return make(errc::invalid_chunk, "chunk " + std::to_string(msg.chunk) + " of " +
                                         to_string(key_) + " from " + to_string(msg.prefill_rank) +
                                         " covers pages [" + std::to_string(msg.first_page) + ", " +
                                         std::to_string(end) + "), the room has " +
                                         std::to_string(dst_pages_.size()));
  auto pages = std::span<const uint32_t>{dst_pages_}.subspan(msg.first_page, msg.pages);
  uint32_t skip = msg.first_page == 0 ? prefix_tokens_ % local_.page_size : 0;
  auto landed = chunk_digests(src->layout, local_, digest_side::destination, bases, pages, skip);
  if (!landed.ok())
    return make(errc::checksum_mismatch, "chunk " + std::to_string(msg.chunk) + " of " +
                                             to_string(key_) + ": " + landed.error().message());
  if (auto bad = digest_mismatch(src->layout, local_, msg.digests, *landed, pages, msg.first_page))
    return make(errc::checksum_mismatch, "chunk " + std::to_string(msg.chunk) + " of " +
                                             to_string(key_) + " from " +
                                             to_string(msg.prefill_rank) + ": " + *bad);
  return std::nullopt;
}

bool decode_room::all_sources_done() const {
  auto writers = std::count_if(sources_.begin(), sources_.end(),
                               [](const room_source& s) { return !s.dummy; });
  return writers > 0 && done_.size() == static_cast<size_t>(writers);
}

std::optional<room_join> decode_room::next_join(const rank_ref& me,
                                                const std::vector<participant>& everyone) {
  if (announced_)
    return std::nullopt;
  room_join j{key_.room, me, {}};
  if (!everyone.empty()) {
    j.prefill = everyone;
    announced_ = true;
  }
  ++joins_sent_;
  return j;
}

bool decode_room::begin_watch() {
  if (joined_ || fsm_.terminal())
    return false;
  joined_ = true;
  return true;
}

std::vector<std::string> decode_room::writers() const {
  std::vector<std::string> out;
  for (auto& s : sources_)
    if (!s.dummy)
      out.push_back(s.endpoint);
  return out;
}

bool decode_room::stages() const {
  return std::any_of(sources_.begin(), sources_.end(),
                     [](const room_source& s) { return !s.dummy && s.staged; });
}

staging_room decode_room::staging_open() const {
  staging_room out{key_, dst_pages_, {}, prefix_tokens_ % local_.page_size};
  for (auto& s : sources_)
    if (s.staged && !s.dummy)
      out.writers.push_back({s.rank, s.layout});
  return out;
}

std::vector<addressed_request> decode_room::requests(const rank_ref& me,
                                                     const decider_actor& decider) const {
  std::vector<addressed_request> out;
  for (auto& s : sources_) {
    room_request req{key_, me, decider, {}, no_aux_slot, {}, s.dummy, prefix_tokens_};
    if (!s.dummy)
      req.dst_pages = dst_pages_;
    if (s.writes_aux) {
      req.aux_slot = aux_slot_;
      req.dst_states = states_;
    }
    out.push_back({s.rank, std::move(req)});
  }
  return out;
}

}  // namespace kvferry
