#include "apps/common/child_process.hpp"

#include <cerrno>
#include <fstream>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stdexcept>

namespace kvferry::apps {

child_process::child_process(std::vector<std::string> argv) {
  int fds[2];
  int ins[2];
  if (::pipe2(fds, O_CLOEXEC) != 0 || ::pipe2(ins, O_CLOEXEC) != 0)
    throw std::runtime_error("pipe2 failed");
  pid_ = ::fork();
  if (pid_ < 0)
    throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    ::dup2(ins[0], 0);
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    std::vector<char*> args;
    for (auto& a : argv)
      args.push_back(a.data());
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  ::close(ins[0]);
  fd_ = fds[0];
  in_ = ins[1];
}

void child_process::close_stdin() {
  if (in_ >= 0) {
    ::close(in_);
    in_ = -1;
  }
}

bool child_process::write_stdin(const std::string& text) {
  size_t done = 0;
  while (in_ >= 0 && done < text.size()) {
    auto n = ::write(in_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    done += static_cast<size_t>(n);
  }
  return in_ >= 0;
}

child_process::~child_process() {
  if (!status_ && pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  if (fd_ >= 0)
    ::close(fd_);
  close_stdin();
}

bool child_process::pump(std::chrono::milliseconds timeout) {
  if (eof_)
    return false;
  pollfd p{fd_, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0)
    return true;
  char buf[4096];
  auto n = ::read(fd_, buf, sizeof(buf));
  if (n <= 0) {
    eof_ = true;
    return false;
  }
  out_.append(buf, static_cast<size_t>(n));
  return true;
}

std::optional<std::string> child_process::wait_for_line(
    const std::function<bool(const std::string&)>& pred, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    for (auto nl = out_.find('\n', scanned_); nl != std::string::npos;
         nl = out_.find('\n', scanned_)) {
      auto line = out_.substr(scanned_, nl - scanned_);
      scanned_ = nl + 1;
      if (pred(line))
        return line;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || !pump(std::min(left, std::chrono::milliseconds{100})))
      if (left.count() <= 0 || eof_)
        return std::nullopt;
  }
}

int child_process::wait(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!status_) {
    pump(std::chrono::milliseconds{50});
    int st = 0;
    if (::waitpid(pid_, &st, WNOHANG) == pid_) {
      status_ = st;
      break;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &st, 0);
      status_ = -1;
      while (pump(std::chrono::milliseconds{10}))
        ;
      return -1;
    }
  }
  while (pump(std::chrono::milliseconds{10}))
    ;
  return WIFEXITED(*status_) ? WEXITSTATUS(*status_) : 128 + WTERMSIG(*status_);
}

bool child_process::exited() const {
  std::ifstream stat{"/proc/" + std::to_string(pid_) + "/stat"};
  std::string line;
  std::getline(stat, line);
  auto paren = line.rfind(')');
  return paren == std::string::npos || (paren + 2 < line.size() && line[paren + 2] == 'Z');
}

}  // namespace kvferry::apps
