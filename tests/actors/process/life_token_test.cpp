// The life token (actors/process/life_token.hpp) with a real second process:
// a watcher hears of a SIGKILL at once (the robust mutex), of an orderly end
// as "ended", of a process that exits without letting its token go as a
// death, and nothing of a process that is only stopped (SIGSTOP). No timing
// is asserted; the test prints how long the notice of the kill took.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include <catch2/catch.hpp>

#include "actors/process/life_token.hpp"
#include "apps/common/child_process.hpp"

using namespace kvferry;
using namespace std::chrono_literals;

namespace {

/// A peer process holding a token, and what a watcher heard of it.
struct peer {
  apps::child_process proc{{KVFERRY_LIFE_PEER}};
  life_token_ref where;
  std::atomic<int> heard{-1};  // -1 nothing, 1 died, 0 ended
  std::atomic<int64_t> heard_ns{0};

  peer() {
    auto line =
        proc.wait_for_line([](const std::string& l) { return l.rfind("token ", 0) == 0; }, 10s);
    REQUIRE(line);
    where = {this_host_id(), line->substr(6)};
  }

  life_watch::on_end notice() {
    return [this](bool died) {
      heard_ns = std::chrono::steady_clock::now().time_since_epoch().count();
      heard = died ? 1 : 0;
    };
  }

  bool wait_heard(std::chrono::milliseconds limit) {
    auto until = std::chrono::steady_clock::now() + limit;
    while (heard.load() < 0 && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(1ms);
    return heard.load() >= 0;
  }
};

}  // namespace

TEST_CASE("life token: a SIGKILL is heard at once, as a death", "[life-token]") {
  peer p;
  life_watch w;
  std::string why;
  REQUIRE(w.watch(p.where, p.notice(), &why));
  std::this_thread::sleep_for(50ms);  // the watch thread blocks on the mutex
  auto t0 = std::chrono::steady_clock::now().time_since_epoch().count();
  ::kill(p.proc.pid(), SIGKILL);
  REQUIRE(p.wait_heard(5s));
  CHECK(p.heard == 1);
  WARN("kill to the life token's notice: " << (p.heard_ns - t0) / 1e3 << " us");
  p.proc.wait(5s);
}

TEST_CASE("life token: an orderly end reads ended, not dead", "[life-token]") {
  peer p;
  life_watch w;
  REQUIRE(w.watch(p.where, p.notice()));
  REQUIRE(p.proc.write_stdin("end\n"));
  REQUIRE(p.wait_heard(5s));
  CHECK(p.heard == 0);
  CHECK(p.proc.wait(5s) == 0);
}

TEST_CASE("life token: an exit that never lets it go reads as a death", "[life-token]") {
  peer p;
  life_watch w;
  REQUIRE(w.watch(p.where, p.notice()));
  p.proc.close_stdin();  // end of input: the peer _exits, its token held
  REQUIRE(p.wait_heard(5s));
  CHECK(p.heard == 1);
  p.proc.wait(5s);
}

TEST_CASE("life token: a stopped process is not dead, and killed later it is", "[life-token]") {
  peer p;
  life_watch w;
  REQUIRE(w.watch(p.where, p.notice()));
  ::kill(p.proc.pid(), SIGSTOP);
  CHECK_FALSE(p.wait_heard(600ms));
  ::kill(p.proc.pid(), SIGCONT);
  CHECK_FALSE(p.wait_heard(100ms));
  ::kill(p.proc.pid(), SIGKILL);
  REQUIRE(p.wait_heard(5s));
  CHECK(p.heard == 1);
  p.proc.wait(5s);
}

TEST_CASE("life token: what cannot be watched says why", "[life-token]") {
  life_watch w;
  std::string why;
  CHECK_FALSE(w.watch(
      {}, [](bool) {}, &why));
  CHECK(why == "no life token");
  CHECK_FALSE(w.watch(
      {"another-host", "kvferry-life-1-2"}, [](bool) {}, &why));
  CHECK(why == "its life token is on another host");
  CHECK_FALSE(w.watch(
      {this_host_id(), "kvferry-life-0-0"}, [](bool) {}, &why));
  CHECK_THAT(why, Catch::Contains("shm_open of /kvferry-life-0-0"));
  auto mine = life_token::take();
  REQUIRE(mine);
  // A watcher in the same process as the holder: nothing to learn early.
  CHECK(w.watch(
      mine->where(), [](bool) {}, &why));
  mine.reset();
}
