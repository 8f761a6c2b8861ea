// Lines that reach their stream whole. A process's own lines (reports,
// progress, conclusions) and its log lines (spdlog, on stderr) share one pipe
// when a launcher reads them; a line written in pieces (a stream buffer
// flushed every few KiB) can get another writer's line spliced into it. Here
// every line goes out in one write(2): a pipe keeps a write of up to PIPE_BUF
// bytes (4 KiB) whole, whoever else writes to it.
#pragma once

#include <string_view>

namespace kvferry::apps {

/// Writes each line of `text` to `fd` ('\n' added to each, a last empty line
/// dropped), one write(2) per line, under one lock for the whole process so
/// that the lines of one call stay together among this process's writers.
void write_lines(int fd, std::string_view text);

/// write_lines() to standard output.
void say(std::string_view text);

}  // namespace kvferry::apps
