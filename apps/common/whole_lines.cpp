#include "apps/common/whole_lines.hpp"

#include <cerrno>
#include <mutex>
#include <string>

#include <unistd.h>

namespace kvferry::apps {

namespace {

std::mutex& writers() {
  static std::mutex mu;
  return mu;
}

/// One write(2) of the whole line; a short write (a signal, a full pipe that
/// accepted part of a line longer than PIPE_BUF) writes the rest after it.
void write_all(int fd, const std::string& line) {
  size_t done = 0;
  while (done < line.size()) {
    auto n = ::write(fd, line.data() + done, line.size() - done);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return;  // the reader is gone: nothing to tell it
    }
    done += static_cast<size_t>(n);
  }
}

}  // namespace

void write_lines(int fd, std::string_view text) {
  std::lock_guard<std::mutex> guard{writers()};
  std::string line;
  size_t at = 0;
  while (at < text.size()) {
    auto nl = text.find('\n', at);
    auto end = nl == std::string_view::npos ? text.size() : nl;
    line.assign(text.substr(at, end - at));
    line += '\n';
    write_all(fd, line);
    at = end + 1;
  }
  if (text.empty())
    write_all(fd, "\n");
}

void say(std::string_view text) {
  write_lines(STDOUT_FILENO, text);
}

}  // namespace kvferry::apps
