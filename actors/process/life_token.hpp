// A process's life token, and watching the tokens of other processes on the
// same host: a death notice within a millisecond of a SIGKILL.
//
// The token is a robust, process-shared pthread mutex in a small named
// shared-memory file (/dev/shm/kvferry-life-PID-NONCE) that the process locks
// once and holds until it exits. When a process dies, SIGKILL included, the
// kernel walks its robust-futex list and wakes a waiter with EOWNERDEAD before
// it tears the address space down; the process's sockets close only after that
// teardown (about 100 ms per GiB of touched 4 KiB pages, 0.36 s for 4 GiB, on
// this machine kind: shared/reference/machine-limits.md). A watcher blocked on
// the mutex therefore learns of the death in about 0.1-0.25 ms, whatever memory
// the process held. A process that exits in order marks its token ended and
// unlocks it first, so its watchers read "ended", not "died". A frozen process
// (SIGSTOP) holds its token: silence stays the heartbeat's to judge.
//
// Watching works wherever the watcher can open the holder's file: the same
// host and the same /dev/shm (a container with its own /dev/shm cannot; it
// falls back on CAF's down_msg, which comes after the teardown). Plain POSIX,
// no CAF; the actors that watch (the bootstrap, the decider) turn a notice
// into a life_ended message to themselves.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "messages/life.hpp"

namespace kvferry {

/// The boot id of this host (/proc/sys/kernel/random/boot_id), "" if unknown.
const std::string& this_host_id();

/// A life token held by this process: taken by take(), held by a thread of
/// its own (a robust mutex belongs to a thread, and one that exits releases
/// it as dead) until end() or destruction lets it go in order.
class life_token {
 public:
  /// A new token, or null when the host has no usable shared memory.
  static std::unique_ptr<life_token> take();

  life_token(const life_token&) = delete;
  life_token& operator=(const life_token&) = delete;
  ~life_token();

  const life_token_ref& where() const;

  /// Marks the token ended and lets it go: its watchers read "ended".
  void end();

  struct state;

 private:
  explicit life_token(std::unique_ptr<state> s);
  std::unique_ptr<state> state_;
};

/// This process's token, taken on first use and held until the process
/// exits (at a normal exit, marked ended and unlocked); empty when the host
/// has no usable shared memory. Thread-safe.
const life_token_ref& this_process_life();

/// Marks this process's token ended and releases it (an orderly stop): its
/// watchers read "ended". Safe to call more than once, or with no token.
void end_this_process_life();

/// Watches the tokens of other processes, one thread each, blocked on the
/// token's mutex (woken at the holder's death, or at most every 200 ms to
/// see whether it is still wanted). Destroying the watch lets every thread go
/// within that time; none of them calls anything after that.
class life_watch {
 public:
  /// `died`: true when the holder died (EOWNERDEAD), false when it ended in
  /// order. Called at most once per watch, from the watch's thread.
  using on_end = std::function<void(bool died)>;

  life_watch() = default;
  life_watch(const life_watch&) = delete;
  life_watch& operator=(const life_watch&) = delete;
  ~life_watch();

  /// Starts watching `where` (false, with `why`, when it is not on this
  /// host, is this process's own, or cannot be opened: the caller falls back
  /// on its monitors). A token watched already is not watched twice.
  bool watch(const life_token_ref& where, on_end f, std::string* why = nullptr);

  /// Stops watching `name` (its holder deregistered, or was replaced).
  void forget(const std::string& name);

  size_t size() const { return watched_.size(); }

 private:
  struct entry;
  /// The watch thread's loop for `e` (life_token.cpp).
  static void watch_until_end(const std::shared_ptr<entry>& e);
  std::vector<std::shared_ptr<entry>> watched_;
};

}  // namespace kvferry
