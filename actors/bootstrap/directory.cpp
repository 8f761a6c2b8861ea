#include "actors/bootstrap/directory.hpp"

namespace kvferry {

std::optional<std::string> directory::add(rank_registration reg) {
  auto who = "rank tp" + std::to_string(reg.rank.tp) + " pp" + std::to_string(reg.rank.pp);
  if (reg.tp_size == 0 || reg.pp_size == 0)
    return who + " registered tp_size " + std::to_string(reg.tp_size) + " pp_size " +
           std::to_string(reg.pp_size) + ", expected both at least 1";
  if (reg.rank.tp >= reg.tp_size || reg.rank.pp >= reg.pp_size)
    return who + " outside tp_size " + std::to_string(reg.tp_size) + " x pp_size " +
           std::to_string(reg.pp_size);
  if (auto bad = validate(reg.layout))
    return who + " layout: " + *bad;
  if (!ranks_.empty()) {
    if (reg.tp_size != tp_size_ || reg.pp_size != pp_size_)
      return who + " registered tp_size " + std::to_string(reg.tp_size) + " x pp_size " +
             std::to_string(reg.pp_size) + ", the instance has " + std::to_string(tp_size_) +
             " x " + std::to_string(pp_size_);
    auto& first = ranks_.begin()->second.layout;
    if (reg.layout.page_size != first.page_size)
      return who + " registered page_size " + std::to_string(reg.layout.page_size) +
             ", the instance's other ranks use " + std::to_string(first.page_size);
    if (reg.layout.dtype != first.dtype)
      return who + " registered kv dtype " + to_string(reg.layout.dtype) +
             ", the instance's other ranks use " + to_string(first.dtype);
  }
  if (reg.layout.tp_size != reg.tp_size || reg.layout.pp_size != reg.pp_size ||
      reg.layout.tp_rank != reg.rank.tp || reg.layout.pp_rank != reg.rank.pp)
    return who + " registered as tp" + std::to_string(reg.rank.tp) + "/" +
           std::to_string(reg.tp_size) + " pp" + std::to_string(reg.rank.pp) + "/" +
           std::to_string(reg.pp_size) + " with a layout of tp" +
           std::to_string(reg.layout.tp_rank) + "/" + std::to_string(reg.layout.tp_size) + " pp" +
           std::to_string(reg.layout.pp_rank) + "/" + std::to_string(reg.layout.pp_size);
  tp_size_ = reg.tp_size;
  pp_size_ = reg.pp_size;
  reg.rank.side = role::prefill;
  reg.rank.instance = instance_;
  reg.rank.instance_generation = generation_;
  auto key = std::make_pair(reg.rank.pp, reg.rank.tp);
  ranks_.insert_or_assign(key, std::move(reg));
  departed_.erase(key);
  return std::nullopt;
}

std::optional<rank_left> directory::depart(rank_left gone) {
  auto key = std::make_pair(gone.rank.pp, gone.rank.tp);
  if (ranks_.erase(key) == 0)
    return std::nullopt;
  gone.bootstrap = address_;
  gone.rank.side = role::prefill;
  gone.rank.instance = instance_;
  gone.rank.instance_generation = generation_;
  departed_.insert_or_assign(key, gone);
  // The sizes stay: the instance keeps its shape while a rank is missing.
  return gone;
}

bool directory::remove(uint32_t tp, uint32_t pp) {
  auto erased = ranks_.erase(std::make_pair(pp, tp)) > 0;
  if (ranks_.empty() && departed_.empty())
    tp_size_ = pp_size_ = 0;
  return erased;
}

topology directory::snapshot() const {
  topology t;
  t.instance = instance_;
  t.instance_generation = generation_;
  t.tp_size = tp_size_;
  t.pp_size = pp_size_;
  for (auto& [key, reg] : ranks_)
    t.ranks.push_back(reg);
  for (auto& [key, gone] : departed_)
    t.departed.push_back(gone);
  t.bootstrap = address_;
  return t;
}

std::optional<std::string> dp_group_problem(const std::string& instance, uint32_t known,
                                            uint32_t group, uint32_t asked) {
  auto cap = bootstrap_locator::max_dp_groups;
  auto what = "DP group " + std::to_string(group) + " of prefill instance " + instance;
  if (asked > cap)
    return what + ": dp_size " + std::to_string(asked) + ", expected 1 to " + std::to_string(cap);
  if (known != 0 && asked != 0 && asked != known)
    return what + ": the rank says the instance has " + std::to_string(asked) +
           " DP groups, its other ranks said " + std::to_string(known);
  auto size = known != 0 ? known : asked != 0 ? asked : cap;
  if (group >= size)
    return what + ": expected a group from 0 to " + std::to_string(size - 1) +
           (known != 0 || asked != 0 ? " (dp_size " + std::to_string(size) + ")" : "");
  return std::nullopt;
}

std::string dp_group_instance(const std::string& instance, uint32_t group) {
  return instance + "/dp" + std::to_string(group);
}

}  // namespace kvferry
