#include "messages/bootstrap.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <tuple>

namespace kvferry {

std::string bootstrap_locator::key() const {
  if (handle)
    return "local:" + std::to_string(handle.id());
  auto h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return h + ":" + std::to_string(port);
}

failure instance_dead(const std::string& instance, uint64_t generation, const rank_left& gone) {
  auto secs = static_cast<std::time_t>(gone.left_at_ns / 1'000'000'000);
  auto millis = static_cast<int>((gone.left_at_ns / 1'000'000) % 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char when[48];
  std::snprintf(when, sizeof(when), "%04d-%02d-%02d %02d:%02d:%02d.%03d UTC", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, millis);
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

}  // namespace kvferry
