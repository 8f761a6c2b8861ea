#include "actors/metrics/rank_figures.hpp"

namespace kvferry::metrics {

namespace {

label_set with(label_set base, std::string key, std::string value) {
  base.emplace_back(std::move(key), std::move(value));
  return base;
}

constexpr const char* rooms_help = "Rooms concluded on the rank, by outcome";
constexpr const char* seconds_help = "Rooms' time from open to conclusion on the rank";

/// Index of a non-terminal state in the in-flight arrays; -1 for terminal.
int slot_of(kv_poll s) {
  switch (s) {
    case kv_poll::bootstrapping:
      return 0;
    case kv_poll::waiting_for_input:
      return 1;
    case kv_poll::transferring:
      return 2;
    default:
      return -1;
  }
}

}  // namespace

label_set rank_labels(const rank_ref& rank) {
  return {{"kv_instance", rank.instance},
          {"role", to_string(rank.side)},
          {"tp", std::to_string(rank.tp)},
          {"pp", std::to_string(rank.pp)}};
}

rank_figures::rank_figures(std::shared_ptr<registry> reg, const rank_ref& rank)
    : reg_(std::move(reg)),
      base_(rank_labels(rank)),
      success_(
          reg_->counter_at("kvferry_rooms_total", rooms_help, with(base_, "outcome", "success"))),
      failed_(
          reg_->counter_at("kvferry_rooms_total", rooms_help, with(base_, "outcome", "failed"))),
      success_seconds_(reg_->histogram_at("kvferry_room_seconds", seconds_help,
                                          with(base_, "outcome", "success"))),
      failed_seconds_(reg_->histogram_at("kvferry_room_seconds", seconds_help,
                                         with(base_, "outcome", "failed"))) {
  for (auto s : {kv_poll::bootstrapping, kv_poll::waiting_for_input, kv_poll::transferring})
    in_flight_[slot_of(s)] =
        &reg_->gauge_at("kvferry_rooms_in_flight", "Rooms open on the rank, by state",
                        with(base_, "state", to_string(s)));
}

rank_figures::~rank_figures() {
  for (size_t i = 0; i < in_flight_.size(); ++i)
    in_flight_[i]->add(-mine_[i]);
}

int64_t rank_figures::in_flight(kv_poll s) const {
  auto i = slot_of(s);
  return i < 0 ? 0 : mine_[i];
}

void rank_figures::moved(std::optional<kv_poll> from, kv_poll to, const failure& why,
                         std::chrono::nanoseconds age) {
  if (from) {
    if (auto i = slot_of(*from); i >= 0) {
      in_flight_[i]->add(-1);
      --mine_[i];
    }
  }
  if (auto i = slot_of(to); i >= 0) {
    in_flight_[i]->add(1);
    ++mine_[i];
    return;
  }
  if (to == kv_poll::success) {
    success_.add();
    success_seconds_.observe(age);
    return;
  }
  failed_.add();
  failed_seconds_.observe(age);
  auto key = std::make_pair(why.code, to_string(why.origin));
  auto f = failures_.find(key);
  if (f == failures_.end()) {
    auto labels = with(with(base_, "code", to_string(why.code)), "origin", key.second);
    f = failures_
            .emplace(key,
                     &reg_->counter_at("kvferry_room_failures_total",
                                       "Rooms failed on the rank, by code and origin rank", labels))
            .first;
  }
  f->second->add();
}

void rank_figures::fast_failed(errc code) {
  auto f = fast_failed_.find(code);
  if (f == fast_failed_.end())
    f = fast_failed_
            .emplace(code, &reg_->counter_at(
                               "kvferry_fast_fail_total",
                               "Rooms failed as they opened: their peer instance was known down",
                               with(base_, "code", to_string(code))))
            .first;
  f->second->add();
}

}  // namespace kvferry::metrics
