// A child process (the bench's peers, the end-to-end tests' nodes): started
// with fork/exec, its stdout and stderr read through a pipe, its stdin a pipe
// the parent can close to tell it to finish, waited for with a timeout (and
// killed on it).
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace kvferry::apps {

class child_process {
 public:
  explicit child_process(std::vector<std::string> argv);
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;
  /// Kills the child if it still runs.
  ~child_process();

  /// Reads output until a line satisfies `pred`; returns it, or nullopt on
  /// timeout or end of output.
  std::optional<std::string> wait_for_line(const std::function<bool(const std::string&)>& pred,
                                           std::chrono::milliseconds timeout);

  /// Reads the rest of the output and waits for the exit; the exit code, or
  /// -1 if the child had to be killed after `timeout`.
  int wait(std::chrono::milliseconds timeout);

  /// Closes the child's stdin (peers treat it as "finish now").
  void close_stdin();

  /// Writes `text` to the child's stdin (false once it is closed or gone).
  bool write_stdin(const std::string& text);

  /// Everything the child printed so far.
  const std::string& output() const { return out_; }

  int pid() const { return pid_; }

  /// True once the child has exited (a zombie not reaped yet, or gone);
  /// reads /proc, reaps nothing.
  bool exited() const;

 private:
  /// Reads what is available within `timeout`; false at end of output.
  bool pump(std::chrono::milliseconds timeout);

  int pid_ = -1;
  int fd_ = -1;
  int in_ = -1;
  bool eof_ = false;
  std::string out_;
  size_t scanned_ = 0;  // lines before this offset were offered to wait_for_line
  std::optional<int> status_;
};

}  // namespace kvferry::apps
