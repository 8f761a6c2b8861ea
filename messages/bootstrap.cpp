#include "messages/bootstrap.hpp"

#include <algorithm>
#include <tuple>

#include "messages/wall_clock.hpp"

namespace kvferry {

std::string bootstrap_locator::key() const {
  auto group = has_dp_group() ? "/dp" + std::to_string(dp_group) : std::string{};
  if (handle)
    return "local:" + std::to_string(handle.id()) + group;
  auto h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return h + ":" + std::to_string(port) + group;
}

failure instance_dead(const std::string& instance, uint64_t generation, const rank_left& gone) {
  auto when = utc_time(gone.left_at_ns);
  auto how = gone.orderly     ? "it shut down"
             : gone.link_lost ? "its process or its link was lost"
                              : "its actor ended";
  auto where = gone.bootstrap.empty() ? std::string{} : " (bootstrap " + gone.bootstrap + ")";
  return failure{errc::instance_dead,
                 "prefill instance " + instance + where + " is dead: " + to_string(gone.rank) +
                     " left at " + when + ": " + how + " (" + gone.reason + ")",
                 instance_ref(role::prefill, instance, generation)};
}

std::optional<failure> instance_dead(const topology& t) {
  if (!t.dead())
    return std::nullopt;
  auto first = std::min_element(t.departed.begin(), t.departed.end(),
                                [](const rank_left& a, const rank_left& b) {
                                  return std::tie(a.left_at_ns, a.rank.pp, a.rank.tp) <
                                         std::tie(b.left_at_ns, b.rank.pp, b.rank.tp);
                                });
  return instance_dead(t.instance, t.instance_generation, *first);
}

bool departed_orderly(const topology& t) {
  return std::all_of(t.departed.begin(), t.departed.end(),
                     [](const rank_left& d) { return d.orderly; });
}

}  // namespace kvferry
