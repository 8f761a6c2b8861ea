#include "apps/ctl/room_timeline.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <map>
#include <ostream>
#include <set>

#include <caf/actor_cast.hpp>
#include <caf/scoped_actor.hpp>

#include "messages/handles.hpp"

namespace kvferry::ctl {

namespace {

std::string wall_text(int64_t ns) {
  std::time_t s = static_cast<std::time_t>(ns / 1'000'000'000);
  std::tm tm{};
  gmtime_r(&s, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02d %02d:%02d:%02d.%06d UTC", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>((ns / 1000) % 1'000'000));
  return buf;
}

std::string ms(int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f ms", static_cast<double>(ns) / 1e6);
  return buf;
}

std::string json_text(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

bool starts(const std::string& s, const std::string& with) {
  return s.rfind(with, 0) == 0;
}

/// The first event (by wall clock) for which `pred` holds, or nullptr.
template <class Pred>
const room_event* first(const room_timeline& t, Pred pred) {
  for (auto& e : t.events)
    if (pred(e))
      return &e;
  return nullptr;
}

template <class Pred>
const room_event* last(const room_timeline& t, Pred pred) {
  for (auto i = t.events.rbegin(); i != t.events.rend(); ++i)
    if (pred(*i))
      return &*i;
  return nullptr;
}

/// Where the time went, as (step, duration ns) pairs, from the first rank
/// to reach each step: handshake (opened → WaitingForInput), waiting for
/// input (→ Transferring), the transfer (→ the last chunk landed), the
/// verdict (the last report or chunk → the last verdict).
std::vector<std::pair<std::string, int64_t>> phases(const room_timeline& t) {
  std::vector<std::pair<std::string, int64_t>> out;
  auto opened = first(t, [](auto& e) { return starts(e.what, "opened"); });
  auto waiting = first(t, [](auto& e) { return e.what == "WaitingForInput"; });
  auto moving = first(t, [](auto& e) { return e.what == "Transferring"; });
  auto landed = last(t, [](auto& e) {
    return starts(e.what, "chunk ") && e.what.find(" landed") != std::string::npos;
  });
  auto verdict = last(t, [](auto& e) { return starts(e.what, "verdict "); });
  auto before_verdict = last(t, [&](auto& e) {
    return verdict && e.wall_ns <= verdict->wall_ns && !starts(e.what, "verdict ") &&
           (starts(e.what, "chunk ") || e.what == "reported to the decider");
  });
  auto span = [&](const char* name, const room_event* a, const room_event* b) {
    if (a && b && b->wall_ns >= a->wall_ns)
      out.emplace_back(name, b->wall_ns - a->wall_ns);
  };
  span("handshake (opened to WaitingForInput)", opened, waiting);
  span("waiting for input (to Transferring)", waiting, moving);
  span("transfer (to the last chunk landed)", moving, landed);
  span("verdict (the last chunk or report to the last verdict)", before_verdict, verdict);
  return out;
}

size_t chunks(const room_timeline& t) {
  size_t n = 0;
  for (auto& e : t.events)
    n += starts(e.what, "chunk ") && e.what.find(" landed") != std::string::npos;
  return n;
}

/// The first cause: the earliest event that carries one.
const room_event* first_cause(const room_timeline& t) {
  return first(t, [](auto& e) { return !e.cause.empty(); });
}

}  // namespace

room_timeline gather_trace(caf::actor_system& sys, const cluster_view& v, uint64_t room,
                           caf::timespan timeout) {
  room_timeline t;
  t.room = room;
  caf::scoped_actor self{sys};
  std::set<std::string> asked;
  for (auto& n : v.nodes) {
    if (!n.status) {
      t.missed.push_back("node " + n.node->name + ": " + n.error);
      continue;
    }
    for (auto& r : n.status->ranks) {
      if (!r.last.actor || !asked.insert(r.last.rank).second)
        continue;
      if (!r.up) {
        t.missed.push_back(r.last.rank + ": down (" + r.down_reason + ")");
        continue;
      }
      auto handle = caf::actor_cast<caf::actor>(r.last.actor);
      self->request(handle, timeout, trace_atom_v, room)
          .receive(
              [&](room_trace& got) {
                t.ranks.push_back(got.rank);
                for (auto& e : got.events)
                  if (e.room == room)  // a stranger's answer has only what was asked
                    t.events.push_back(std::move(e));
              },
              [&](caf::error& err) { t.missed.push_back(r.last.rank + ": " + sys.render(err)); });
    }
  }
  std::stable_sort(t.events.begin(), t.events.end(),
                   [](auto& a, auto& b) { return a.wall_ns < b.wall_ns; });
  return t;
}

void print_trace(std::ostream& out, const room_timeline& t) {
  out << "room " << t.room << ": " << t.events.size() << " events from " << t.ranks.size()
      << (t.ranks.size() == 1 ? " rank" : " ranks");
  if (t.events.empty()) {
    out << " (no rank holds it: never opened, or older than what the ranks keep)\n";
  } else {
    out << ", from " << wall_text(t.events.front().wall_ns) << "\n";
    size_t width = 0;
    for (auto& e : t.events)
      width = std::max(width, e.rank.size());
    auto t0 = t.events.front().wall_ns;
    for (auto& e : t.events) {
      char at[32];
      std::snprintf(at, sizeof at, "%+12.3f ms", static_cast<double>(e.wall_ns - t0) / 1e6);
      out << at << "  " << e.rank << std::string(width - e.rank.size(), ' ') << "  #"
          << e.generation << "  " << e.what;
      if (!e.cause.empty())
        out << ": " << e.cause;
      out << "\n";
    }
    out << "where the time went (first rank to reach each step):\n";
    for (auto& [step, ns] : phases(t))
      out << "  " << step << ": " << ms(ns) << "\n";
    out << "  chunks landed: " << chunks(t) << "\n";
    std::map<std::string, std::string> outcome;  // rank → its last state
    for (auto& e : t.events)
      if (e.what == "Success" || e.what == "Failed")
        outcome[e.rank] = e.what;
    if (auto c = first_cause(t)) {
      out << "first cause: " << ms(c->wall_ns - t0) << " on " << c->rank << ": " << c->cause
          << "\n";
      out << "the verdict travelled:\n";
      for (auto& e : t.events)
        if (starts(e.what, "verdict ") || e.what == "Failed")
          out << "  " << ms(e.wall_ns - c->wall_ns) << " after it: " << e.rank << " " << e.what
              << "\n";
    }
    std::set<std::string> outcomes;
    for (auto& [rank, o] : outcome)
      outcomes.insert(o);
    out << "outcome: ";
    if (outcome.empty())
      out << "not concluded yet";
    else if (outcomes.size() == 1)
      out << *outcomes.begin() << " on " << outcome.size() << " of " << t.ranks.size() << " ranks";
    else
      out << "RANKS DISAGREE";
    out << "\n";
  }
  for (auto& m : t.missed)
    out << "not asked or no answer: " << m << "\n";
}

void print_trace_json(std::ostream& out, const room_timeline& t) {
  out << "{\"room\":" << t.room << ",\"ranks\":[";
  for (size_t i = 0; i < t.ranks.size(); ++i)
    out << (i ? "," : "") << json_text(t.ranks[i]);
  out << "],\"missed\":[";
  for (size_t i = 0; i < t.missed.size(); ++i)
    out << (i ? "," : "") << json_text(t.missed[i]);
  out << "],\"events\":[";
  for (size_t i = 0; i < t.events.size(); ++i) {
    auto& e = t.events[i];
    out << (i ? "," : "") << "{\"wall_ns\":" << e.wall_ns << ",\"rank\":" << json_text(e.rank)
        << ",\"generation\":" << e.generation << ",\"what\":" << json_text(e.what);
    if (!e.cause.empty())
      out << ",\"cause\":" << json_text(e.cause);
    out << "}";
  }
  out << "],\"phases_ns\":{";
  auto ph = phases(t);
  for (size_t i = 0; i < ph.size(); ++i)
    out << (i ? "," : "") << json_text(ph[i].first) << ":" << ph[i].second;
  out << "}";
  if (auto c = first_cause(t))
    out << ",\"first_cause\":{\"rank\":" << json_text(c->rank) << ",\"wall_ns\":" << c->wall_ns
        << ",\"cause\":" << json_text(c->cause) << "}";
  out << "}\n";
}

}  // namespace kvferry::ctl
