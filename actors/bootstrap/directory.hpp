// The directory of one prefill instance: which rank serves which (tp, pp),
// checked for consistency as ranks join. Plain logic behind the bootstrap actor.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "messages/bootstrap.hpp"

namespace kvferry {

class directory {
 public:
  directory(std::string instance, uint64_t generation, std::string address = {})
      : instance_(std::move(instance)), generation_(generation), address_(std::move(address)) {}

  const std::string& instance() const { return instance_; }
  uint64_t generation() const { return generation_; }

  /// Adds a rank, or replaces the one registered for the same (tp, pp). The
  /// registration's rank gets this instance's name and generation. Returns the
  /// problem, naming the values, when it does not fit the ranks before it.
  std::optional<std::string> add(rank_registration reg);

  /// Removes the rank registered for (tp, pp); false if none.
  bool remove(uint32_t tp, uint32_t pp);

  /// Removes the rank `gone.rank` names and records its departure (stamped
  /// with this directory's address): the instance is dead until a rank
  /// registers again for that (tp, pp). Returns the record; nullopt when no
  /// rank was registered there.
  std::optional<rank_left> depart(rank_left gone);

  /// Where the bootstrap is published ("host:port"; "" unknown).
  const std::string& address() const { return address_; }

  /// Who serves the instance now.
  topology snapshot() const;

  size_t size() const { return ranks_.size(); }

 private:
  std::string instance_;
  uint64_t generation_;
  std::string address_;
  uint32_t tp_size_ = 0;
  uint32_t pp_size_ = 0;
  std::map<std::pair<uint32_t, uint32_t>, rank_registration> ranks_;  // by (pp, tp)
  /// Ranks that left and did not register again, by (pp, tp): at most one
  /// per place, so bounded by the instance's size.
  std::map<std::pair<uint32_t, uint32_t>, rank_left> departed_;
};

/// DP attention: whether a rank may have the bootstrap of DP group `group`
/// of `instance`, which has `known` groups (0: not said yet), when it says
/// the instance has `asked` (0: it does not know, as a decode rank). Returns
/// the problem, naming the values; nullopt when it may. Group counts are
/// capped at bootstrap_locator::max_dp_groups.
std::optional<std::string> dp_group_problem(const std::string& instance, uint32_t known,
                                            uint32_t group, uint32_t asked);

/// The name of DP group `group` of instance `instance`: "prefill-0/dp2".
std::string dp_group_instance(const std::string& instance, uint32_t group);

}  // namespace kvferry
