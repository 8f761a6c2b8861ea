#include "apps/common/scheduler_driver.hpp"

#include "apps/common/pool_allocators.hpp"
#include "messages/wall_clock.hpp"

#include <algorithm>
#include <deque>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>

namespace kvferry::apps {

namespace {

using clock_type = std::chrono::steady_clock;

void note_state(run_report& r, std::vector<bool>& seen, kv_poll s) {
  auto i = static_cast<size_t>(s);
  if (!seen[i]) {
    seen[i] = true;
    ++r.states_seen[to_string(s)];
  }
}

void note_failure(run_report& r, const std::optional<transfer_error>& e) {
  ++r.failed;
  if (!e)
    return;
  ++r.failures[to_string(e->why.code)];
  if (r.first_errors.size() < 5)
    r.first_errors.push_back(e->what());
}

/// The driver's pause between two polls that found nothing new: 20 us just
/// after progress, doubling while nothing happens, up to 50 us while rooms
/// are in flight (a room's conclusion is seen within 50 us of it) and 1 ms
/// while none is (waiting for the next room's time, or to be asked). A fixed
/// 20 us nap cost a third of a core per idle process in timer wake-ups: on a
/// 2-core machine, three demo processes waiting for their first room starved
/// the ranks they drive.
class idle_backoff {
 public:
  void wait(bool progressed, bool in_flight) {
    if (progressed) {
      nap_ = first;
      return;
    }
    std::this_thread::sleep_for(nap_);
    nap_ = std::min(nap_ * 2, in_flight ? busy_most : idle_most);
  }

 private:
  static constexpr std::chrono::microseconds first{20};
  static constexpr std::chrono::microseconds busy_most{50};
  static constexpr std::chrono::microseconds idle_most{1000};
  std::chrono::microseconds nap_ = first;
};

}  // namespace

namespace {

/// One room the synthetic scheduler has open, on every rank of the instance.
template <class Handle>
struct live_room {
  std::vector<Handle> handles;
  uint64_t room;
  std::vector<uint32_t> pages;
  uint32_t aux;
  std::vector<bool> seen = std::vector<bool>(5);
  clock_type::time_point opened = clock_type::now();
  std::vector<bool> concluded = std::vector<bool>(handles.size());
  int64_t opened_ns = wall_ns();  ///< system clock, for the conclusions' record
};

/// Paced arrivals: the first room whose time has not passed yet, and whether
/// room `i`'s time has come.
bool due(const workload& w, uint32_t i) {
  return w.interval_us == 0 || w.epoch_ns == 0 ||
         wall_ns() >= w.epoch_ns + static_cast<int64_t>(w.slot(i)) * w.interval_us * 1000;
}

uint32_t first_due(const workload& w) {
  if (w.interval_us == 0 || w.epoch_ns == 0)
    return 0;
  // Rooms whose time has already passed (slot * interval < now - epoch).
  auto late = wall_ns() - w.epoch_ns;
  uint32_t i = 0;
  while (i < w.count() && static_cast<int64_t>(w.slot(i)) * w.interval_us * 1000 < late)
    ++i;
  return i;
}

/// Records each rank's conclusion the first time its poll reads terminal.
template <class Handle>
void note_conclusions(run_report& r, live_room<Handle>& room) {
  for (size_t k = 0; k < room.handles.size(); ++k) {
    auto s = room.handles[k].poll();
    if (room.concluded[k] || !is_terminal(s))
      continue;
    room.concluded[k] = true;
    // When the rank concluded it (its slot says), not when this loop came
    // round to poll it (it may have been checking another room's bytes).
    auto at = room.handles[k].concluded_at_ns();
    conclusion c{room.room, k, s, at != 0 ? at : wall_ns(), {}, room.opened_ns};
    if (auto e = room.handles[k].failure())
      c.why = to_string(e->why);
    r.conclusions.push_back(std::move(c));
  }
}

/// The state of a room across ranks: the lowest (MIN, as a scheduler reduces).
template <class Handle>
kv_poll poll_all(const std::vector<Handle>& hs) {
  auto s = kv_poll::success;
  for (auto& h : hs)
    s = std::min(s, h.poll());
  return s;
}

template <class Handle>
bool all_terminal(const std::vector<Handle>& hs) {
  return std::all_of(hs.begin(), hs.end(), [](const Handle& h) { return is_terminal(h.poll()); });
}

/// Did every rank conclude the same: all Success, or all Failed with the same
/// cause and origin?
template <class Handle>
bool agree(const std::vector<Handle>& hs) {
  auto first = hs.front().poll();
  auto why = hs.front().failure();
  for (auto& h : hs) {
    if (h.poll() != first)
      return false;
    auto e = h.failure();
    if (e.has_value() != why.has_value() || (e && !(e->why == why->why)))
      return false;
  }
  return true;
}

/// The scheduler loop both sides share: keep `w.concurrency` rooms open,
/// reserving random free pages and an aux row for each (the same on every
/// rank; `open` makes the handles), poll them, account for each conclusion
/// (`succeeded` checks a room that reached Success), and give its pages back.
/// Hooks of a router's prefill half (see workload::serve_rerouted): whether
/// a room of the share is not opened now, and rooms asked for elsewhere.
struct router_hooks {
  std::function<bool(uint64_t room)> skip;
  std::function<std::vector<uint64_t>()> asked;
};

template <class Open, class Succeeded>
run_report run_rooms(const instance_ranks& inst, const workload& w, uint64_t alloc_seed, Open open,
                     Succeeded succeeded, const router_hooks& hooks = {}) {
  using handle_t =
      typename decltype(open(uint64_t{}, std::vector<uint32_t>{}, uint32_t{}))::value_type;
  auto& pool = *inst.pools.front();
  run_report r;
  r.rooms = w.count();
  r.ranks = static_cast<uint32_t>(inst.ranks.size());
  page_allocator pages(pool.pages(), alloc_seed);
  row_allocator rows(std::max(1u, pool.aux_rows()));
  std::vector<live_room<handle_t>> in_flight;
  uint32_t next = first_due(w);
  if (w.resume_at)
    next = std::min(next, *w.resume_at);
  std::set<uint64_t> own;  // this driver's share
  if (w.follow_requests) {
    // Nothing by the clock: every room of the share waits to be asked for.
    next = w.count();
    for (uint32_t i = 0; i < w.count(); ++i)
      own.insert(w.room_id(i));
  }
  r.skipped = next;
  r.opened = next;
  auto start = clock_type::now();
  auto last_progress = start;
  idle_backoff idle;
  auto report_progress = [&] {
    r.now.clear();
    for (auto& room : in_flight)
      ++r.now[to_string(poll_all(room.handles))];
    r.seconds = std::chrono::duration<double>(clock_type::now() - start).count();
    w.on_progress(r);
  };
  if (hooks.asked && !w.follow_requests)
    for (uint32_t i = 0; i < w.count(); ++i)
      own.insert(w.room_id(i));
  std::set<uint64_t> served;   // re-routed rooms opened here
  std::deque<uint64_t> extra;  // re-routed rooms waiting for pages
  auto last_asked = clock_type::now();
  auto serving = [&] {
    if (!hooks.asked)
      return false;
    if (!extra.empty())
      return true;
    if (w.serve_until_ns != 0)
      return wall_ns() < w.serve_until_ns;
    return clock_type::now() - last_asked < w.serve_grace;
  };
  while (next < w.count() || !in_flight.empty() || serving()) {
    bool progressed = false;
    if (hooks.asked)
      for (auto id : hooks.asked())
        if ((w.follow_requests || !own.count(id)) && served.insert(id).second) {
          extra.push_back(id);
          last_asked = clock_type::now();
        }
    while (!extra.empty() && in_flight.size() < w.concurrency) {
      auto room = extra.front();
      auto got = pages.take(w.pages_of(room, pool.page_size()));
      auto row = rows.take();
      if (!got || !row) {
        if (got)
          pages.give_back(*got);
        if (row)
          rows.give_back(*row);
        break;
      }
      extra.pop_front();
      auto hs = open(room, *got, *row);
      in_flight.push_back({std::move(hs), room, std::move(*got), *row});
      if (own.count(room)) {
        --r.skipped;  // a room of the share, asked for (follow_requests)
        ++r.opened;
      } else {
        ++r.rooms;
        ++r.served_for_others;
      }
      progressed = true;
    }
    if (w.on_progress && clock_type::now() - last_progress >= w.progress_period) {
      last_progress = clock_type::now();
      report_progress();
    }
    while (next < w.count() && in_flight.size() < w.concurrency && due(w, next)) {
      auto room = w.room_id(next);
      if (hooks.skip && hooks.skip(room)) {
        ++r.rerouted;
        ++next;
        r.opened = next;
        progressed = true;
        continue;
      }
      auto got = pages.take(w.pages_of(room, pool.page_size()));
      auto row = rows.take();
      if (!got || !row) {
        if (got)
          pages.give_back(*got);
        if (row)
          rows.give_back(*row);
        break;  // pool full: wait for a room to conclude
      }
      auto hs = open(room, *got, *row);
      in_flight.push_back({std::move(hs), room, std::move(*got), *row});
      ++next;
      r.opened = next;
      progressed = true;
    }
    for (auto i = in_flight.begin(); i != in_flight.end();) {
      note_state(r, i->seen, poll_all(i->handles));
      if (w.record_conclusions)
        note_conclusions(r, *i);
      if (!all_terminal(i->handles)) {
        ++i;
        continue;
      }
      // A rank may have turned terminal between the two polls: record it
      // before the room is forgotten.
      if (w.record_conclusions)
        note_conclusions(r, *i);
      progressed = true;
      if (w.record_latencies)
        r.latencies_us.push_back(
            std::chrono::duration<double, std::micro>(clock_type::now() - i->opened).count());
      if (!agree(i->handles)) {
        ++r.disagreements;
        if (r.disagreements <= 5) {
          // How: each rank's conclusion, so that the difference can be read;
          // ahead of the plain failures (a disagreement matters more).
          if (r.first_errors.size() >= 5)
            r.first_errors.pop_back();
          std::string how;
          for (size_t k = 0; k < i->handles.size(); ++k) {
            auto e = i->handles[k].failure();
            how += "; rank " + std::to_string(k) + " " + to_string(i->handles[k].poll()) +
                   (e ? " (" + to_string(e->why) + ")" : "");
          }
          r.first_errors.insert(r.first_errors.begin() + (r.disagreements - 1),
                                "room " + std::to_string(i->room) +
                                    ": the ranks of the instance concluded differently" + how);
        }
      }
      if (poll_all(i->handles) == kv_poll::success) {
        ++r.success;
        for (auto* p : inst.pools)
          r.bytes += uint64_t{i->pages.size()} * p->page_bytes() + p->aux_row_bytes();
        succeeded(i->room, i->pages, i->aux, r);
      } else {
        for (auto& h : i->handles)
          if (h.poll() == kv_poll::failed) {
            note_failure(r, h.failure());
            break;
          }
      }
      pages.give_back(i->pages);
      rows.give_back(i->aux);
      for (auto& h : i->handles)
        h.clear();
      i = in_flight.erase(i);
    }
    idle.wait(progressed, !in_flight.empty());
  }
  r.seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  if (w.on_progress)
    report_progress();
  return r;
}

uint32_t aux_of(const host_pool& pool, uint32_t row) {
  return pool.aux_rows() > 0 ? row : no_aux_slot;
}

}  // namespace

run_report drive_prefill(const instance_ranks& inst, const workload& w) {
  auto open = [&](uint64_t room, const std::vector<uint32_t>& pages, uint32_t row) {
    auto n = static_cast<uint32_t>(pages.size());
    std::vector<sender> out;
    for (size_t k = 0; k < inst.ranks.size(); ++k) {
      auto& pool = *inst.pools[k];
      // The "forward pass": this room's KV lands in its pages on every rank.
      pool.fill_room(w.seed, room, pages, aux_of(pool, row));
      auto s = inst.ranks[k]->make_sender(room);
      s.init(n, pool.aux_rows() > 0 ? std::optional<uint32_t>{row} : std::nullopt);
      auto step = w.chunk_pages == 0 ? std::max<uint32_t>(n, 1) : w.chunk_pages;
      for (uint32_t off = 0;; off += step) {
        auto end = std::min(n, off + step);
        s.send(std::vector<uint32_t>(pages.begin() + off, pages.begin() + end), end == n);
        if (end == n)
          break;
      }
      out.push_back(std::move(s));
    }
    return out;
  };
  auto nothing = [](uint64_t, const std::vector<uint32_t>&, uint32_t, run_report&) {};
  router_hooks hooks;
  if (w.serve_rerouted || w.follow_requests) {
    // Not opened while the instance is dead: a router sends them elsewhere.
    if (w.serve_rerouted)
      hooks.skip = [&inst](uint64_t) {
        for (auto* rt : inst.ranks)
          if (rt->instance_down())
            return true;
        return false;
      };
    // Asked for on every rank of the instance (each one's decode peers ask it).
    hooks.asked = [&inst] {
      std::vector<uint64_t> out;
      if (inst.ranks.empty())
        return out;
      auto first = inst.ranks.front()->requested_rooms();
      for (auto id : first) {
        bool everywhere = true;
        for (size_t k = 1; k < inst.ranks.size() && everywhere; ++k) {
          auto more = inst.ranks[k]->requested_rooms();
          everywhere = std::find(more.begin(), more.end(), id) != more.end();
        }
        if (everywhere)
          out.push_back(id);
      }
      return out;
    };
  }
  auto r = run_rooms(inst, w, w.seed * 31 + 1, open, nothing, hooks);
  r.side_prefill = true;
  return r;
}

run_report drive_decode(const instance_ranks& inst, const workload& w,
                        const bootstrap_locator& where) {
  return drive_decode(inst, w, [&where](uint64_t) { return where; });
}

run_report drive_decode(const instance_ranks& inst, const workload& w,
                        const std::function<bootstrap_locator(uint64_t room)>& where_of) {
  uint32_t rerouted = 0;
  auto open = [&](uint64_t room, const std::vector<uint32_t>& pages, uint32_t row) {
    std::vector<receiver> out;
    auto where = where_of(room);
    if (w.route) {
      auto to = w.route(room, where);
      if (to.key() != where.key())
        ++rerouted;
      where = std::move(to);
    }
    for (size_t k = 0; k < inst.ranks.size(); ++k) {
      auto r = inst.ranks[k]->make_receiver(room, where);
      r.init(pages, inst.pools[k]->aux_rows() > 0 ? std::optional<uint32_t>{row} : std::nullopt);
      out.push_back(std::move(r));
    }
    return out;
  };
  auto verify = [&](uint64_t room, const std::vector<uint32_t>& pages, uint32_t row,
                    run_report& r) {
    bool good = true;
    for (auto* pool : inst.pools)
      good = good && pool->holds_room(w.seed, room, pages, aux_of(*pool, row));
    ++(good ? r.verified : r.corrupted);
    if (!good && r.first_errors.size() < 5)
      r.first_errors.push_back("room " + std::to_string(room) +
                               ": Success but its bytes differ from the prefill pattern");
  };
  auto r = run_rooms(inst, w, w.seed * 37 + 5, open, verify);
  r.rerouted = rerouted;
  return r;
}

}  // namespace kvferry::apps
