#include "tests/support/fault_sim.hpp"

#include "tests/support/instance_fixture.hpp"  // first: the CAF/Catch bridge

#include <algorithm>
#include <functional>
#include <random>
#include <set>

#include "actors/staging/staging_actor.hpp"

namespace kvferry::test::sim {

namespace {

using namespace std::chrono_literals;

constexpr uint64_t room_id = 7;
/// DP scenarios: the room of DP group 0, which every fault must spare.
constexpr uint64_t spared_room = 8;
constexpr uint32_t src_aux = 1;
constexpr uint32_t dst_aux = 2;
const std::vector<uint32_t> src_pages{1, 2, 3, 4};
const std::vector<uint32_t> dst_pages{9, 3, 6, 12};

/// Short deadlines: virtual time is free, but the bounds stay readable.
deadlines sim_limits() {
  deadlines d;
  d.bootstrapping = 2s;
  d.waiting_for_input = 3s;
  d.transferring = 2s;
  d.verdict = 1s;
  d.heartbeat = 100ms;
  d.heartbeat_misses = 3;
  return d;
}

const char* name_of(fault_kind k) {
  switch (k) {
    case fault_kind::none:
      return "no fault";
    case fault_kind::kill:
      return "kill";
    case fault_kind::cut_off:
      return "cut off";
    case fault_kind::abort:
      return "abort on";
  }
  return "?";
}

std::string name_of(target t, uint32_t index) {
  switch (t) {
    case target::prefill_rank:
      return "prefill rank " + std::to_string(index);
    case target::decode_rank:
      return "decode rank " + std::to_string(index);
    case target::decider:
      return "the decider";
    case target::bootstrap:
      return "the bootstrap";
    case target::prefill_node:
      return "the prefill node";
    case target::decode_node:
      return "the decode node";
  }
  return "?";
}

uint64_t hash_bytes(const std::byte* p, size_t n, uint64_t h) {
  for (size_t i = 0; i < n; ++i)
    h = (h ^ static_cast<uint64_t>(p[i])) * 1099511628211ull;
  return h;
}

class world : public instance_fixture {
 public:
  explicit world(const scenario& s) : s_(s), rng_(s.seed) {
    limits = sim_limits();
    pool_pages = 16;
    std::stable_sort(s_.strikes.begin(), s_.strikes.end(),
                     [](auto& a, auto& b) { return a.step < b.step; });
  }

  ~world() override {
    spared_ = {};
    spared_prefill_ = {};
    spared_decode_ = {};
    if (spared_dec_)
      caf::anon_send_exit(spared_dec_, caf::exit_reason::kill);
    sched.run();
  }

  report play() {
    if (s_.dp)
      start_dp();
    else
      start(s_.prefill_tp, 1, s_.decode_tp, 1, false);
    settle();  // registration and the decider's membership
    open();
    settle();  // handshake, destination pages, requests
    send_chunk({1, 2}, false);
    settle();
    send_chunk({3, 4}, true);
    settle();  // the last chunk, the aux row, completion, the verdict
    rep_.steps = delivered_;
    while (next_ < s_.strikes.size())
      strike(s_.strikes[next_++]);  // after the verdict
    settle();
    auto bound = limits.bootstrapping + limits.waiting_for_input + limits.transferring +
                 limits.verdict + limits.decider_silence() + 4 * limits.heartbeat;
    pass(bound);
    check_terminal(false);
    check_agreement(false);
    // The cut-off part heals: it catches up and must agree as well.
    frozen.clear();
    heals_.clear();
    settle();
    pass(bound);
    check_terminal(true);
    check_agreement(true);
    check_bytes();
    check_spared();
    // The schedulers clear the room everywhere; everything is given back.
    for (auto& s : h_.senders)
      s.clear();
    for (auto& r : h_.receivers)
      r.clear();
    if (s_.dp) {
      spared_.senders.front().clear();
      spared_.receivers.front().clear();
    }
    settle();
    pass(bound);
    track_releases();
    check_released();
    check_no_write_after_release();
    check_leaks();
    check_spared_leaks();
    return std::move(rep_);
  }

 private:
  // -- driving ----------------------------------------------------------------

  /// Delivers one message to an actor that is not cut off. False if none waits.
  bool step() {
    auto& jobs = sched.jobs;
    std::vector<size_t> live;
    for (size_t i = 0; i < jobs.size(); ++i) {
      auto* a = dynamic_cast<caf::abstract_actor*>(jobs[i]);
      if (a == nullptr || !frozen.count(a))
        live.push_back(i);
    }
    if (live.empty())
      return false;
    size_t pick = live.front();
    if (s_.seed != 0)
      pick = live[std::uniform_int_distribution<size_t>{0, live.size() - 1}(rng_)];
    if (pick != 0)
      std::rotate(jobs.begin(), jobs.begin() + static_cast<std::ptrdiff_t>(pick),
                  jobs.begin() + static_cast<std::ptrdiff_t>(pick) + 1);
    if (next_ == 0 && !s_.strikes.empty() && delivered_ + 1 == s_.strikes.front().step)
      rep_.struck_at = describe_next();
    sched.run_once();
    ++delivered_;
    return true;
  }

  std::string describe_next() {
    auto* sa = dynamic_cast<caf::scheduled_actor*>(sched.jobs.front());
    if (sa == nullptr)
      return "?";
    auto* e = sa->peek_at_next_mailbox_element();
    auto text = std::string{sa->name()} + " <- " + (e ? caf::to_string(e->content()) : "?");
    if (text.size() > 120)
      text = text.substr(0, 117) + "...";
    return text;
  }

  /// Delivers until nothing waits, striking at the chosen step; with a seed,
  /// the clock moves now and then between deliveries.
  void settle() {
    auto moved = std::chrono::nanoseconds{0};
    for (;;) {
      while (next_ < s_.strikes.size() && delivered_ >= s_.strikes[next_].step)
        strike(s_.strikes[next_++]);
      for (auto h = heals_.begin(); h != heals_.end();)
        if (delivered_ >= h->first) {
          for (auto* a : h->second)
            frozen.erase(a);
          h = heals_.erase(h);
        } else {
          ++h;
        }
      if (s_.seed != 0 && moved < 30s && std::uniform_int_distribution<int>{0, 15}(rng_) == 0) {
        sched.advance_time(limits.heartbeat / 2);
        moved += limits.heartbeat / 2;
      }
      if (!step())
        break;
      observe();
    }
  }

  /// Lets `d` of virtual time pass, timer by timer.
  void pass(std::chrono::nanoseconds d) {
    auto& clock = sched.clock();
    auto end = clock.current_time + d;
    for (;;) {
      auto& pending = clock.schedule();
      if (pending.empty() || pending.begin()->first > end)
        break;
      sched.advance_time(std::max(pending.begin()->first - clock.current_time,
                                  std::chrono::steady_clock::duration{0}));
      settle();
    }
    if (clock.current_time < end)
      sched.advance_time(end - clock.current_time);
    settle();
  }

  // -- DP attention: the room's groups beside a spared one -------------------

  /// Group 1 of each side is the room's (the fixture's ranks); group 0 is one
  /// prefill rank behind the same bootstrap and one decode rank with its own
  /// decider. The groups' bootstraps exist before any rank asks, so that a
  /// strike at any step finds the room's.
  void start_dp() {
    dp_group = 1;
    dp_size = 2;
    boot = sys.spawn(bootstrap, std::string{"prefill-0"}, uint64_t{3});
    auto rh = self->request(boot, caf::infinite, dp_group_atom_v, uint32_t{1}, uint32_t{2});
    sched.run();
    rh.receive([&](caf::strong_actor_ptr& p) { group_boot_ = caf::actor_cast<bootstrap_actor>(p); },
               [](caf::error&) {});
    REQUIRE(group_boot_);
    dec = sys.spawn(decider, std::string{"decode-0"}, s_.decode_tp, 1u, uint64_t{4}, limits);
    spared_dec_ = sys.spawn(decider, std::string{"decode-0/dp0"}, 1u, 1u, uint64_t{5}, limits);
    for (uint32_t t = 0; t < s_.prefill_tp; ++t)
      prefill.push_back(make(role::prefill, t, s_.prefill_tp, 0, 1, prefill.size()));
    for (uint32_t t = 0; t < s_.decode_tp; ++t)
      decode.push_back(make(role::decode, t, s_.decode_tp, 0, 1, decode.size()));
    spared_prefill_ = make(role::prefill, 0, 1, 0, 1, 100, group0());
    spared_decode_ = make(role::decode, 0, 1, 0, 1, 101, group0(),
                          decider_locator{spared_dec_, "", 0}, "decode-0/dp0");
  }

  bootstrap_locator group0() const { return bootstrap_locator{boot, "", 0, 0, 2}; }

  /// Whether DP group 0 heard of the room (checked after every delivery).
  void check_isolated() {
    if (!s_.dp || isolation_broken_)
      return;
    auto& p = state_of<prefill_rank_state>(spared_prefill_.rt->prefill());
    auto& d = state_of<decode_rank_state>(spared_decode_.rt->decode());
    if (p.rooms.count(room_id) == 0 && d.rooms.count(room_id) == 0)
      return;
    isolation_broken_ = true;
    violation(std::string{"isolation: DP group 0's "} +
              (p.rooms.count(room_id) ? "prefill" : "decode") + " rank holds room 7 of group 1");
  }

  /// DP group 0's room: Success on both of its ranks, byte for byte, whatever
  /// struck group 1 (FIFO delivery); with random delivery, one conclusion.
  void check_spared() {
    if (!s_.dp)
      return;
    auto& s = spared_.senders.front();
    auto& r = spared_.receivers.front();
    if (s_.seed != 0) {
      // Random delivery with clock steps can starve group 0's own
      // heartbeats: its room must then conclude alike on both its ranks.
      if (s.poll() != r.poll() ||
          (s.poll() == kv_poll::failed &&
           (!s.failure() || !r.failure() || s.failure()->why != r.failure()->why)))
        violation("spared: DP group 0's ranks concluded room 8 differently: prefill " +
                  to_string(s.poll()) + ", decode " + to_string(r.poll()));
      return;
    }
    for (auto [name, state, why] : {std::tuple{"prefill", s.poll(), s.failure()},
                                    std::tuple{"decode", r.poll(), r.failure()}})
      if (state != kv_poll::success)
        violation(std::string{"spared: DP group 0's "} + name + " rank concluded room 8 " +
                  to_string(state) + (why ? ": " + to_string(why->why) : std::string{}));
    if (r.poll() == kv_poll::success &&
        !spared_decode_.pool->holds_room(seed, spared_room, dst_pages, dst_aux))
      violation("spared: DP group 0's decode rank concluded room 8 without its exact bytes");
  }

  void check_spared_leaks() {
    if (!s_.dp)
      return;
    if (!spared_.senders.front().released() || !spared_.receivers.front().released())
      violation("leak: DP group 0 never released room 8's pages after it was cleared");
    auto& p = state_of<prefill_rank_state>(spared_prefill_.rt->prefill());
    auto& d = state_of<decode_rank_state>(spared_decode_.rt->decode());
    if (!p.rooms.empty() || !d.rooms.empty() || state_of<decider_state>(spared_dec_).book.size())
      violation("leak: DP group 0 keeps " + std::to_string(p.rooms.size()) + " prefill rooms, " +
                std::to_string(d.rooms.size()) + " decode rooms, " +
                std::to_string(state_of<decider_state>(spared_dec_).book.size()) +
                " decider rooms");
  }

  void open() {
    if (s_.dp) {
      spared_.receivers.push_back(spared_decode_.rt->make_receiver(spared_room, group0()));
      spared_.receivers.back().init(dst_pages, dst_aux);
      spared_prefill_.pool->fill_room(seed, spared_room, src_pages, src_aux);
      spared_.senders.push_back(spared_prefill_.rt->make_sender(spared_room));
      spared_.senders.back().init(static_cast<uint32_t>(src_pages.size()), src_aux);
    }
    for (auto& r : decode) {
      h_.receivers.push_back(r.rt->make_receiver(room_id, where()));
      h_.receivers.back().init(dst_pages, dst_aux);
    }
    for (auto& r : prefill) {
      r.pool->fill_room(seed, room_id, src_pages, src_aux);
      h_.senders.push_back(r.rt->make_sender(room_id));
      h_.senders.back().init(static_cast<uint32_t>(src_pages.size()), src_aux);
    }
    snapshots_.assign(decode.size(), std::nullopt);
    reused_.assign(prefill.size(), false);
    prefill_seen_.assign(prefill.size(), false);
    prefill_alone_.assign(prefill.size(), false);
    decode_seen_.assign(decode.size(), false);
    decode_alone_.assign(decode.size(), false);
  }

  void send_chunk(const std::vector<uint32_t>& pages, bool last) {
    for (auto& s : h_.senders)
      s.send(pages, last);
    for (auto& s : spared_.senders)
      s.send(pages, last);
  }

  // -- the fault --------------------------------------------------------------

  std::vector<caf::actor> actors_of(target t, uint32_t index) {
    std::vector<caf::actor> out;
    auto add_prefill = [&](rank& r) {
      out.push_back(caf::actor_cast<caf::actor>(r.rt->prefill()));
      out.push_back(caf::actor_cast<caf::actor>(r.rt->transfer()));
    };
    // A decode rank's process holds its staging actor too.
    auto add_decode = [&](rank& r) {
      out.push_back(caf::actor_cast<caf::actor>(r.rt->decode()));
      if (r.rt->staging())
        out.push_back(caf::actor_cast<caf::actor>(r.rt->staging()));
    };
    switch (t) {
      case target::prefill_rank:
        add_prefill(prefill.at(index));
        break;
      case target::decode_rank:
        add_decode(decode.at(index));
        break;
      case target::decider:
        out.push_back(caf::actor_cast<caf::actor>(dec));
        break;
      case target::bootstrap:  // with DP groups: the room's group's
        out.push_back(caf::actor_cast<caf::actor>(s_.dp ? group_boot_ : boot));
        break;
      case target::prefill_node:
        for (auto& r : prefill)
          add_prefill(r);
        out.push_back(caf::actor_cast<caf::actor>(s_.dp ? group_boot_ : boot));
        break;
      case target::decode_node:
        for (auto& r : decode)
          add_decode(r);
        out.push_back(caf::actor_cast<caf::actor>(dec));
        break;
    }
    return out;
  }

  void strike(const fault& f) {
    switch (f.kind) {
      case fault_kind::none:
        return;
      case fault_kind::abort:
        if (f.where == target::prefill_rank && f.index < h_.senders.size())
          h_.senders[f.index].abort();
        if (f.where == target::decode_rank && f.index < h_.receivers.size())
          h_.receivers[f.index].abort();
        return;
      case fault_kind::kill:
        for (auto& a : actors_of(f.where, f.index)) {
          killed_.insert(caf::actor_cast<caf::abstract_actor*>(a));
          caf::anon_send_exit(a, caf::exit_reason::kill);
        }
        return;
      case fault_kind::cut_off: {
        std::vector<const caf::abstract_actor*> cut;
        for (auto& a : actors_of(f.where, f.index)) {
          freeze(a);
          cut.push_back(caf::actor_cast<caf::abstract_actor*>(a));
          ever_cut_.insert(cut.back());
        }
        if (f.heal_after > 0)
          heals_.emplace_back(delivered_ + f.heal_after, std::move(cut));
        return;
      }
    }
  }

  // -- who is who -------------------------------------------------------------

  struct view {
    std::string name;
    bool prefill_side;
    size_t index;
    kv_poll state;
    std::optional<transfer_error> error;
  };

  template <class Handle>
  bool is_killed(const Handle& h) const {
    return killed_.count(caf::actor_cast<caf::abstract_actor*>(h)) > 0;
  }

  /// True if `h` was cut off at some point: until every part healed, it may
  /// not have had its deadlines' worth of time yet.
  template <class Handle>
  bool was_cut(const Handle& h) const {
    return ever_cut_.count(caf::actor_cast<caf::abstract_actor*>(h)) > 0;
  }

  /// Every rank that was never cut off and still runs (with `healed`, also
  /// those that were cut off).
  std::vector<view> survivors(bool healed) {
    std::vector<view> out;
    for (size_t k = 0; k < h_.senders.size(); ++k) {
      auto p = prefill[k].rt->prefill();
      if (is_killed(p) || (!healed && was_cut(p)))
        continue;
      out.push_back({"prefill rank " + std::to_string(k), true, k, h_.senders[k].poll(),
                     h_.senders[k].failure()});
    }
    for (size_t k = 0; k < h_.receivers.size(); ++k) {
      auto d = decode[k].rt->decode();
      if (is_killed(d) || (!healed && was_cut(d)))
        continue;
      out.push_back({"decode rank " + std::to_string(k), false, k, h_.receivers[k].poll(),
                     h_.receivers[k].failure()});
    }
    return out;
  }

  void violation(std::string what) { rep_.violations.push_back(std::move(what)); }

  // -- the checks -------------------------------------------------------------

  void check_terminal(bool healed) {
    for (auto& v : survivors(healed))
      if (!is_terminal(v.state)) {
        std::string inside;
        if (v.prefill_side) {
          auto& st = state_of<prefill_rank_state>(prefill[v.index].rt->prefill());
          inside = " (its actor has " + std::to_string(st.rooms.size()) + " rooms";
          if (auto r = st.rooms.find(room_id); r != st.rooms.end())
            inside += ", room 7 in " + to_string(r->second.fsm().state());
          inside += ")";
        }
        violation("termination: " + v.name + " is still in " + to_string(v.state) +
                  (healed ? " after the partition healed" : "") + " past every deadline" + inside);
      }
  }

  /// A rank that concluded with no decider for the room: a prefill rank that
  /// failed it (its scheduler's abort, its own deadline) before any decode
  /// rank asked for it, or a decode rank whose decider was lost or never
  /// reached. It must fail like the others, with its own cause, its
  /// instance's or the lost decider's: nobody could tell it another.
  /// Recorded when the rank concludes (see observe()).
  bool concluded_alone(const view& v) {
    auto& alone = v.prefill_side ? prefill_alone_ : decode_alone_;
    return v.index < alone.size() && alone[v.index];
  }

  /// Whether rank `k` of one side, concluding now with `why`, had no decider.
  bool without_decider(bool prefill_side, size_t k, const failure& why) {
    auto& origin = why.origin;
    rank_ref me;
    bool none = false;
    if (prefill_side) {
      auto& st = state_of<prefill_rank_state>(prefill[k].rt->prefill());
      me = st.cfg.self;
      none = st.deciders.count(room_id) == 0;
    } else {
      auto& st = state_of<decode_rank_state>(decode[k].rt->decode());
      me = st.cfg.self;
      none = !st.registered;
    }
    return none && origin.side == me.side && origin.instance == me.instance &&
           (origin.names_instance() || origin.tp == me.tp);
  }

  /// After every delivery: who concluded now, and with or without a decider.
  void observe() {
    track_releases();
    check_isolated();
    auto look = [&](bool prefill_side, size_t k, const auto& handle, const auto& actor) {
      auto& seen = prefill_side ? prefill_seen_ : decode_seen_;
      auto& alone = prefill_side ? prefill_alone_ : decode_alone_;
      if (seen[k] || is_killed(actor) || handle.poll() != kv_poll::failed)
        return;
      seen[k] = true;
      if (auto e = handle.failure())
        alone[k] = without_decider(prefill_side, k, e->why);
    };
    for (size_t k = 0; k < h_.senders.size(); ++k)
      look(true, k, h_.senders[k], prefill[k].rt->prefill());
    for (size_t k = 0; k < h_.receivers.size(); ++k)
      look(false, k, h_.receivers[k], decode[k].rt->decode());
  }

  void check_agreement(bool healed) {
    auto all = survivors(healed);
    const view* success = nullptr;
    const view* failed = nullptr;
    for (auto& v : all) {
      if (v.state == kv_poll::success && !success)
        success = &v;
      if (v.state == kv_poll::failed && !failed)
        failed = &v;
    }
    if (success && failed) {
      violation("agreement: " + success->name + " concluded Success, " + failed->name +
                " Failed: " + (failed->error ? to_string(failed->error->why) : "?"));
      return;
    }
    if (!failed)
      return;
    // The reference: a rank that concluded with the room's decider.
    const view* ref = nullptr;
    for (auto& v : all)
      if (v.state == kv_poll::failed && !concluded_alone(v)) {
        ref = &v;
        break;
      }
    if (!ref)
      return;
    for (auto& v : all) {
      if (v.state != kv_poll::failed || &v == ref || concluded_alone(v))
        continue;
      if (!v.error || !ref->error || v.error->why != ref->error->why)
        violation("agreement: " + ref->name + " failed with \"" + to_string(ref->error->why) +
                  "\", " + v.name + " with \"" + (v.error ? to_string(v.error->why) : "?") + "\"");
    }
  }

  void check_bytes() {
    for (auto& v : survivors(true))
      if (!v.prefill_side && v.state == kv_poll::success &&
          !decode[v.index].pool->holds_room(seed, room_id, dst_pages, dst_aux))
        violation("bytes: " + v.name + " concluded Success without the room's exact bytes");
  }

  uint64_t hash_destination(size_t k) {
    auto& pool = *decode[k].pool;
    uint64_t h = 1469598103934665603ull;
    for (size_t b = 0; b < pool.buffers(); ++b)
      for (auto page : dst_pages)
        h = hash_bytes(pool.page(b, page), pool.item_len() * pool.page_size(), h);
    return hash_bytes(pool.aux_row(dst_aux), pool.aux_row_bytes(), h);
  }

  /// Decode: the bytes of a released room are recorded (nothing may change
  /// them any more). Prefill: a released room's source pages are reused at
  /// once, as a scheduler would; a write that still read them would carry
  /// the garbage into decode pages.
  void track_releases() {
    for (size_t k = 0; k < h_.receivers.size(); ++k)
      if (!snapshots_[k] && h_.receivers[k].released())
        snapshots_[k] = hash_destination(k);
    for (size_t k = 0; k < h_.senders.size(); ++k)
      if (!reused_[k] && h_.senders[k].released()) {
        reused_[k] = true;
        auto& pool = *prefill[k].pool;
        for (size_t b = 0; b < pool.buffers(); ++b)
          for (auto page : src_pages)
            std::fill_n(pool.page(b, page), pool.item_len() * pool.page_size(), std::byte{0xEE});
        std::fill_n(pool.aux_row(src_aux), pool.aux_row_bytes(), std::byte{0xEE});
      }
  }

  void check_released() {
    for (auto& v : survivors(true)) {
      bool released =
          v.prefill_side ? h_.senders[v.index].released() : h_.receivers[v.index].released();
      if (!released)
        violation("leak: " + v.name + " never released the room's pages after it was cleared");
    }
  }

  void check_no_write_after_release() {
    for (size_t k = 0; k < snapshots_.size(); ++k)
      if (snapshots_[k] && *snapshots_[k] != hash_destination(k))
        violation("write after release: decode rank " + std::to_string(k) +
                  "'s pages changed after they were released");
  }

  void check_leaks() {
    for (size_t k = 0; k < prefill.size(); ++k) {
      auto p = prefill[k].rt->prefill();
      if (is_killed(p))
        continue;
      auto& st = state_of<prefill_rank_state>(p);
      auto name = "prefill rank " + std::to_string(k);
      if (!st.rooms.empty() || st.early.waiting_rooms() != 0 || !st.deciders.empty() ||
          st.deciders_heard.size() != 0)
        violation("leak: " + name + " keeps " + std::to_string(st.rooms.size()) + " rooms, " +
                  std::to_string(st.early.waiting_rooms()) + " pending requests, " +
                  std::to_string(st.deciders.size()) + " deciders, " +
                  std::to_string(st.deciders_heard.size()) + " watched");
      auto& t = state_of<transfer_state>(prefill[k].rt->transfer());
      size_t waiting = t.queue.size();
      if (!t.book.empty() || !t.reply_to.empty() || waiting != 0 || !t.gathered.idle())
        violation("leak: the transfer actor of " + name + " keeps " +
                  std::to_string(t.book.jobs().size()) + " jobs, " +
                  std::to_string(t.book.batches()) + " batches, " + std::to_string(waiting) +
                  " staged jobs waiting" + (t.gathered.idle() ? "" : ", gather space"));
    }
    for (size_t k = 0; k < decode.size(); ++k) {
      auto d = decode[k].rt->decode();
      if (is_killed(d))
        continue;
      auto& st = state_of<decode_rank_state>(d);
      if (!st.rooms.empty() || !st.draining.empty() || st.deciders_heard.size() != 0)
        violation("leak: decode rank " + std::to_string(k) + " keeps " +
                  std::to_string(st.rooms.size()) + " rooms, " +
                  std::to_string(st.draining.size()) + " draining fences, " +
                  std::to_string(st.deciders_heard.size()) + " watched");
      auto ring = decode[k].rt->staging();
      if (ring && !is_killed(ring)) {
        auto& sst = state_of<staging_state>(ring);
        if (sst.book->rooms() != 0 || sst.book->chunks_held() != 0 || !sst.waiting.empty())
          violation("leak: the staging actor of decode rank " + std::to_string(k) + " keeps " +
                    std::to_string(sst.book->rooms()) + " rooms, " +
                    std::to_string(sst.book->chunks_held()) + " chunks of ring space, " +
                    std::to_string(sst.waiting.size()) + " waiting asks");
      }
    }
    if (!is_killed(dec)) {
      auto& st = state_of<decider_state>(dec);
      // Its members stay watched for good; nothing of the room stays. A
      // rank's last answer is kept a while after no room names it (its
      // silence still counts from it if one does again soon): at most one
      // per rank of the scenario, gone after two silences.
      if (st.book.size() != 0 || st.beats.size() > st.members.size() ||
          st.answered_at.size() > decode.size() + prefill.size() || !st.prefill.empty())
        violation("leak: the decider keeps " + std::to_string(st.book.size()) + " rooms, " +
                  std::to_string(st.beats.size()) + " watched ranks (" +
                  std::to_string(st.members.size()) + " members), " +
                  std::to_string(st.prefill.size()) + " prefill handles");
    }
  }

  scenario s_;
  // DP scenarios: the room's group's bootstrap, and DP group 0 with its room.
  bootstrap_actor group_boot_;
  decider_actor spared_dec_;
  rank spared_prefill_, spared_decode_;
  room_handles spared_;
  bool isolation_broken_ = false;
  std::mt19937_64 rng_;
  report rep_;
  room_handles h_;
  size_t delivered_ = 0;
  size_t next_ = 0;  // the next strike
  std::vector<std::pair<size_t, std::vector<const caf::abstract_actor*>>> heals_;
  std::set<const caf::abstract_actor*> killed_;
  std::set<const caf::abstract_actor*> ever_cut_;
  std::vector<std::optional<uint64_t>> snapshots_;
  std::vector<bool> prefill_seen_, prefill_alone_, decode_seen_, decode_alone_;
  std::vector<bool> reused_;
};

}  // namespace

std::string to_string(const scenario& s) {
  auto out = "TP " + std::to_string(s.prefill_tp) + "->" + std::to_string(s.decode_tp) +
             (s.dp ? " in DP group 1 of 2" : "") + ", ";
  if (s.strikes.empty())
    out += "no fault, ";
  for (auto& f : s.strikes) {
    out += name_of(f.kind);
    if (f.kind != fault_kind::none)
      out += " " + name_of(f.where, f.index) + " at step " + std::to_string(f.step);
    if (f.kind == fault_kind::cut_off && f.heal_after > 0)
      out += " (heals " + std::to_string(f.heal_after) + " steps later)";
    out += ", ";
  }
  return out + "seed " + std::to_string(s.seed);
}

report run(const scenario& s) {
  world w{s};
  return w.play();
}

std::vector<fault> every_fault(uint32_t prefill_tp, uint32_t decode_tp, size_t steps) {
  std::vector<std::pair<target, uint32_t>> targets;
  for (uint32_t i = 0; i < prefill_tp; ++i)
    targets.emplace_back(target::prefill_rank, i);
  for (uint32_t i = 0; i < decode_tp; ++i)
    targets.emplace_back(target::decode_rank, i);
  for (auto t : {target::decider, target::bootstrap, target::prefill_node, target::decode_node})
    targets.emplace_back(t, 0);
  std::vector<fault> out;
  for (size_t step = 0; step <= steps; ++step) {
    for (auto kind : {fault_kind::kill, fault_kind::cut_off})
      for (auto [t, i] : targets)
        out.push_back({kind, t, i, step});
    out.push_back({fault_kind::abort, target::prefill_rank, 0, step});
    out.push_back({fault_kind::abort, target::decode_rank, 0, step});
  }
  return out;
}

}  // namespace kvferry::test::sim
