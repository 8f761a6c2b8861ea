#include "actors/rank/prefill_peer.hpp"

#include <algorithm>

namespace kvferry {

namespace {

constexpr auto retry_base = std::chrono::milliseconds{50};
constexpr auto retry_max = std::chrono::seconds{1};

}  // namespace

prefill_peer::reading prefill_peer::read(const topology& topo, const rank_ref& me,
                                         const kv_layout& mine, instance_size decode) {
  reading out;
  instance = topo.instance;
  everyone.clear();
  for (auto& r : topo.ranks)
    everyone.push_back({r.rank, r.handle, r.control});
  instance_size psize{topo.tp_size, topo.pp_size};
  if (auto bad = check_sizes(psize, decode)) {
    out.what = reading::action::refused;
    out.refusal = failure{errc::unsupported, *bad, me};
    return out;
  }
  auto& first = topo.ranks.front().layout;
  auto plan = sources_of(psize, decode, me.tp, me.pp, first.mla, first.total_kv_heads);
  sources.clear();
  handles.clear();
  accepted.clear();
  decider_reached = false;
  out.round = ++round;
  for (auto& s : plan) {
    auto reg = std::find_if(topo.ranks.begin(), topo.ranks.end(),
                            [&](auto& r) { return r.rank.tp == s.tp && r.rank.pp == s.pp; });
    if (reg == topo.ranks.end()) {
      out.what = reading::action::retry;
      out.error = "no prefill rank tp" + std::to_string(s.tp) + " pp" + std::to_string(s.pp) +
                  " in the topology";
      return out;
    }
    if (auto bad = check_pairing(reg->layout, mine)) {
      out.what = reading::action::refused;
      out.refusal = failure{bad->code, bad->cause, me};
      return out;
    }
    sources.push_back({reg->rank, s.dummy, s.writes_aux, reg->data_endpoint, reg->layout, false});
    handles.emplace(reg->rank, reg->handle);
    out.sources.push_back(*reg);
  }
  out.what = reading::action::handshake;
  return out;
}

void prefill_peer::accept(const rank_ref& src, bool staged) {
  accepted.insert(src);
  for (auto& s : sources)
    if (s.rank == src)
      s.staged = staged;
}

bool prefill_peer::handshake_done() const {
  return (phase == stage::resolving || phase == stage::down) && in_flight &&
         accepted.size() >= sources.size() && decider_reached;
}

bool prefill_peer::come_up() {
  bool was_down = down_since_up;
  down_since_up = false;
  phase = stage::ready;
  contact_lost.reset();
  probe_armed = false;
  in_flight = false;
  attempts = 0;
  return was_down;
}

void prefill_peer::refuse(failure why) {
  phase = stage::refused;
  refusal = std::move(why);
  in_flight = false;
}

prefill_peer::retry prefill_peer::fail(std::string error, bool rooms_waiting) {
  in_flight = false;
  last_error = std::move(error);
  ++attempts;
  if (phase == stage::down)
    return retry::probe;
  if (contact_lost)
    return retry::down;
  return rooms_waiting ? retry::again : retry::idle;
}

prefill_peer::went_down prefill_peer::go_down(failure cause,
                                              std::optional<std::vector<participant>> survivors) {
  went_down out;
  out.fresh = phase != stage::down;
  contact_lost.reset();
  if (out.fresh || down_cause.code != errc::instance_dead)
    down_cause = std::move(cause);
  if (survivors)
    everyone = std::move(*survivors);
  if (out.fresh) {
    phase = stage::down;
    down_since_up = true;
    out.dropped = drop_sources();
  }
  return out;
}

std::vector<prefill_rank_actor> prefill_peer::lose_contact(const rank_ref& bound) {
  phase = stage::resolving;
  contact_lost = bound;
  return drop_sources();
}

std::vector<prefill_rank_actor> prefill_peer::drop_sources() {
  std::vector<prefill_rank_actor> dropped;
  for (auto& [rank, handle] : handles)
    dropped.push_back(handle);
  handles.clear();
  accepted.clear();
  sources.clear();
  ++round;  // a handshake under way is void
  in_flight = false;
  attempts = 0;
  return dropped;
}

bool prefill_peer::arm_probe() {
  if (probe_armed)
    return false;
  probe_armed = true;
  return true;
}

std::chrono::nanoseconds prefill_peer::backoff() const {
  return std::min<std::chrono::nanoseconds>(retry_base * (1u << std::min(attempts, 5u)), retry_max);
}

bool prefill_peer::serves(const rank_ref& rank) const {
  return handles.count(rank) > 0 ||
         std::any_of(everyone.begin(), everyone.end(),
                     [&](const participant& p) { return p.rank == rank; });
}

bool prefill_peer::same_sources(const rank_ref& bound) const {
  return std::any_of(sources.begin(), sources.end(),
                     [&](const room_source& s) { return s.rank == bound; });
}

}  // namespace kvferry
