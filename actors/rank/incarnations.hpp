// The newest incarnation (instance generation) a rank has seen of each peer
// instance. A restarted instance comes back under the same name with a newer
// generation; what still arrives from the older one is refused, and the rooms
// bound to it fail with instance_restarted. Plain logic, no CAF.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "messages/failure.hpp"
#include "messages/ids.hpp"

namespace kvferry {

class incarnations {
 public:
  /// What note() learned from a generation.
  struct change {
    bool older = false;     ///< `r` is of a generation already replaced
    bool replaced = false;  ///< `r` replaces an older generation ...
    uint64_t previous = 0;  ///< ... this one
  };

  /// Records the generation of `r`'s instance.
  change note(const rank_ref& r) {
    auto [i, fresh] = newest_.try_emplace(r.instance, r.instance_generation);
    if (fresh || i->second == r.instance_generation)
      return {};
    if (r.instance_generation < i->second)
      return {true, false, 0};
    change c{false, true, i->second};
    i->second = r.instance_generation;
    return c;
  }

  /// The refusal of a message from `r` when its generation has been replaced.
  std::optional<failure> stale(const rank_ref& r, const rank_ref& self) const {
    auto i = newest_.find(r.instance);
    if (i == newest_.end() || r.instance_generation >= i->second)
      return std::nullopt;
    return failure{errc::instance_restarted,
                   to_string(r) + " is of generation " + std::to_string(r.instance_generation) +
                       " of " + r.instance + ", which generation " + std::to_string(i->second) +
                       " replaced",
                   self};
  }

  /// The failure of a room bound to generation `previous` of `r`'s instance.
  static failure restarted(const rank_ref& r, uint64_t previous, const rank_ref& self) {
    return failure{errc::instance_restarted,
                   r.instance + " restarted: generation " + std::to_string(r.instance_generation) +
                       " replaced generation " + std::to_string(previous),
                   self};
  }

 private:
  std::map<std::string, uint64_t> newest_;
};

}  // namespace kvferry
