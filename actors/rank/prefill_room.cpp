#include "actors/rank/prefill_room.hpp"

#include <algorithm>
#include <string>

namespace kvferry {

namespace {

std::string count_pages(uint64_t n) {
  return std::to_string(n) + (n == 1 ? " page" : " pages");
}

}  // namespace

prefill_room::prefill_room(uint64_t id, room_slot_ptr slot, const rank_ref& self,
                           const kv_layout& local, const deadlines& limits)
    : key_{id, 0}, slot_(std::move(slot)), self_(self), local_(local), fsm_(limits) {}

std::optional<failure> prefill_room::init(uint32_t num_pages, uint32_t aux_slot) {
  if (num_pages_)
    return make(errc::invalid_argument, "init called twice for " + to_string(key_) +
                                            " (first with " + count_pages(*num_pages_) + ")");
  if (num_pages > local_.page_capacity())
    return make(errc::invalid_pages, "num_pages " + std::to_string(num_pages) +
                                         " above the prefill pool's " +
                                         count_pages(local_.page_capacity()));
  if (auto bad = check_aux_slot(local_, aux_slot))
    return make(errc::invalid_argument, *bad);
  for (auto& d : dests_)
    if (!d.dummy && d.dst_pages.size() != num_pages)
      return make(errc::invalid_pages, "decode " + to_string(d.decode_rank) + " gave " +
                                           count_pages(d.dst_pages.size()) + " for a room of " +
                                           count_pages(num_pages));
  num_pages_ = num_pages;
  aux_slot_ = aux_slot;
  fsm_.touch();
  return std::nullopt;
}

std::optional<failure> prefill_room::accept(std::vector<uint32_t> pages, bool last,
                                            std::vector<std::vector<uint32_t>> states) {
  if (!num_pages_)
    return make(errc::invalid_chunk, "chunk of " + count_pages(pages.size()) + " sent before init");
  if (last_accepted_)
    return make(errc::invalid_chunk, "chunk of " + count_pages(pages.size()) +
                                         " after the last one (the room ended at page " +
                                         std::to_string(pages_accepted_) + ")");
  auto end = uint64_t{pages_accepted_} + pages.size();
  if (end > *num_pages_)
    return make(errc::invalid_chunk, "chunk of " + count_pages(pages.size()) + " ends at page " +
                                         std::to_string(end) + ", past the room's " +
                                         count_pages(*num_pages_));
  if (last && end != *num_pages_)
    return make(errc::invalid_chunk, "last chunk ends at page " + std::to_string(end) +
                                         " of the room's " + count_pages(*num_pages_));
  auto cap = local_.page_capacity();
  for (size_t i = 0; i < pages.size(); ++i)
    if (pages[i] >= cap)
      return make(errc::invalid_pages, "source page " + std::to_string(pages[i]) +
                                           " out of range, the prefill pool holds " +
                                           count_pages(cap));
  if (!last && !states.empty())
    return make(errc::invalid_chunk, "state indices on a chunk that is not the last");
  if (last) {
    if (auto bad = check_state_indices(local_, states))
      return make(errc::invalid_argument, *bad);
    states_ = std::move(states);
  }
  if (pages.empty() && !last)
    return std::nullopt;  // nothing to move yet
  queue_.push_back(queued_chunk{next_chunk_++, pages_accepted_, std::move(pages), last});
  pages_accepted_ = static_cast<uint32_t>(end);
  last_accepted_ = last;
  fsm_.touch();
  return std::nullopt;
}

std::optional<failure> prefill_room::bind(const room_request& req, const kv_layout& dst_layout,
                                          uint32_t required) {
  for (auto& d : dests_)
    if (d.decode_rank == req.decode_rank)
      return make(errc::duplicate_room, "second request for " + to_string(req.key) + " from " +
                                            to_string(req.decode_rank));
  if (!dests_.empty() && req.key.generation != key_.generation)
    return make(errc::duplicate_room,
                to_string(req.key) + " requested while " + to_string(key_) + " is bound");
  if (!dests_.empty() && req.prefix_tokens != prefix_tokens_)
    return make(errc::invalid_argument,
                "decode " + to_string(req.decode_rank) + " holds a prefix of " +
                    std::to_string(req.prefix_tokens) + " tokens of " + to_string(req.key) +
                    " and decode " + to_string(dests_.front().decode_rank) + " one of " +
                    std::to_string(prefix_tokens_) + ", expected the same on every decode rank");
  if (!req.dummy) {
    if (num_pages_ && req.dst_pages.size() != *num_pages_)
      return make(errc::invalid_pages, "decode " + to_string(req.decode_rank) + " gave " +
                                           count_pages(req.dst_pages.size()) + " for a room of " +
                                           count_pages(*num_pages_));
    auto cap = dst_layout.page_capacity();
    for (auto p : req.dst_pages)
      if (p >= cap)
        return make(errc::invalid_pages, "destination page " + std::to_string(p) +
                                             " out of range, the decode pool holds " +
                                             count_pages(cap));
    if (req.aux_slot != no_aux_slot)
      if (auto bad = check_aux_slot(dst_layout, req.aux_slot))
        return make(errc::invalid_argument, "destination " + *bad);
    if (!req.dst_states.empty() || req.aux_slot != no_aux_slot)
      if (auto bad = check_state_indices(dst_layout, req.dst_states))
        return make(errc::invalid_argument, "destination " + *bad);
  }
  key_.generation = req.key.generation;
  required_ = required;
  prefix_tokens_ = req.prefix_tokens;
  dests_.push_back(
      room_destination{req.decode_rank, req.dst_pages, req.aux_slot, req.dst_states, req.dummy});
  if (bound() && slot_)
    slot_->set_prefix_tokens(prefix_tokens_);  // before the state leaves Bootstrapping
  return std::nullopt;
}

std::vector<chunk_job> prefill_room::take_jobs() {
  std::vector<chunk_job> jobs;
  if (!bound() || !num_pages_ || fsm_.terminal() || fsm_.awaiting_verdict())
    return jobs;
  for (auto& c : queue_) {
    for (auto& d : dests_) {
      if (d.dummy)
        continue;
      chunk_job job;
      job.key = key_;
      job.peer = d.decode_rank;
      job.chunk = c.index;
      job.src_pages = c.pages;
      job.first_page = c.first_page;
      job.skip_tokens = c.first_page == 0 ? prefix_tokens_ % local_.page_size : 0;
      job.dst_pages.assign(d.dst_pages.begin() + c.first_page,
                           d.dst_pages.begin() + c.first_page + c.pages.size());
      job.last = c.last;
      if (c.last && d.aux_slot != no_aux_slot) {
        job.src_aux = aux_slot_;
        job.dst_aux = d.aux_slot;
        job.src_states = states_;
        job.dst_states = d.dst_states;
      }
      jobs.push_back(std::move(job));
      ++d.jobs_issued;
      d.last_issued = d.last_issued || c.last;
    }
    last_issued_ = last_issued_ || c.last;
  }
  queue_.clear();
  in_flight_ += static_cast<uint32_t>(jobs.size());
  jobs_issued_ += static_cast<uint32_t>(jobs.size());
  return jobs;
}

bool prefill_room::landed(const rank_ref& peer) {
  if (in_flight_ > 0)
    --in_flight_;
  ++landed_jobs_;
  for (auto& d : dests_)
    if (d.decode_rank == peer) {
      ++d.jobs_landed;
      return d.last_issued && d.jobs_landed == d.jobs_issued;
    }
  return false;
}

bool prefill_room::done() const {
  return bound() && last_issued_ && in_flight_ == 0 && landed_jobs_ == jobs_issued_;
}

}  // namespace kvferry
