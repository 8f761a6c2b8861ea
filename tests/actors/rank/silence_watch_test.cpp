// A rank's watch over deciders, by direct calls: times only move forward, a
// stalled watcher restarts every grace period, the limit is exclusive, and a
// label stays with its decider.
#include <catch2/catch.hpp>

#include <chrono>
#include <set>
#include <string>

#include "actors/rank/silence_watch.hpp"

using namespace kvferry;
using namespace std::chrono_literals;

namespace {

using clock_type = std::chrono::steady_clock;
using watch = silence_watch<std::string, clock_type::time_point, std::string>;
const clock_type::time_point t0{std::chrono::seconds{1000}};

}  // namespace

TEST_CASE("silence_watch names the deciders silent for longer than the limit",
          "[logic][heartbeat]") {
  watch w;
  w.watch("a", "decider of d", t0);
  w.watch("b", "decider of e", t0);
  w.heard("b", t0 + 4s);
  CHECK(w.silent(t0 + 5s, 5s).empty());  // exactly the limit is not silent
  CHECK(w.silent(t0 + 5s + 1ms, 5s) == std::vector<std::string>{"a"});
  CHECK(w.silent(t0 + 10s, 5s) == std::vector<std::string>{"a", "b"});
  CHECK(w.heard_within("b", t0 + 9s, 5s));
  CHECK_FALSE(w.heard_within("b", t0 + 9s + 1ms, 5s));
  CHECK_FALSE(w.heard_within("nobody", t0, 5s));
}

TEST_CASE("silence_watch never moves a time back", "[logic][heartbeat]") {
  watch w;
  w.watch("a", "x", t0 + 10s);
  w.heard("a", t0);  // an older word (reordered): ignored
  CHECK(w.silent(t0 + 14s, 5s).empty());
  w.watch("a", "x", t0);  // watching again earlier does not rewind it either
  CHECK(w.silent(t0 + 14s, 5s).empty());
  CHECK(w.silent(t0 + 16s, 5s) == std::vector<std::string>{"a"});
  w.watch("a", "x", t0 + 20s);  // a later watch restarts the grace period
  CHECK(w.silent(t0 + 24s, 5s).empty());
}

TEST_CASE("silence_watch hears only watched deciders", "[logic][heartbeat]") {
  watch w;
  w.heard("a", t0);
  CHECK(w.size() == 0);
  CHECK(w.silent(t0 + 1h, 5s).empty());
}

TEST_CASE("silence_watch restarts every grace period after the watcher stalled",
          "[logic][heartbeat]") {
  watch w;
  w.watch("a", "x", t0);
  w.watch("b", "y", t0 + 30s);
  w.refresh(t0 + 20s);  // the rank itself was frozen until now
  CHECK(w.silent(t0 + 24s, 5s).empty());
  CHECK(w.silent(t0 + 26s, 5s) == std::vector<std::string>{"a"});  // b keeps its later time
  CHECK(w.heard_within("b", t0 + 34s, 5s));
}

TEST_CASE("silence_watch keeps the newest label and forgets what it no longer watches",
          "[logic][heartbeat]") {
  watch w;
  w.watch("a", "decider of d (generation 1)", t0);
  w.watch("a", "decider of d (generation 2)", t0);
  w.watch("b", "decider of e", t0);
  CHECK(w.label_or("a", "?") == "decider of d (generation 2)");
  CHECK(w.label_or("c", "unknown decider") == "unknown decider");
  w.retain({"b"});
  CHECK(w.size() == 1);
  CHECK(w.label_or("a", "gone") == "gone");
  CHECK(w.silent(t0 + 1h, 5s) == std::vector<std::string>{"b"});
}
