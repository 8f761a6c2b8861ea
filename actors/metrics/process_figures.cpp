#include "actors/metrics/process_figures.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <system_error>

namespace kvferry::metrics {

namespace {

/// Inodes of this process's sockets, from the links in /proc/self/fd.
std::set<uint64_t> socket_inodes(uint64_t& fds) {
  std::set<uint64_t> out;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++fds;
    std::error_code lec;
    auto target = std::filesystem::read_symlink(it->path(), lec).string();
    // "socket:[12345]"
    if (!lec && target.starts_with("socket:[") && target.back() == ']')
      out.insert(std::strtoull(target.c_str() + 8, nullptr, 10));
  }
  return out;
}

/// Established connections in `table` (/proc/net/tcp or tcp6) whose inode
/// is one of `mine`.
uint64_t established(const char* table, const std::set<uint64_t>& mine) {
  std::ifstream in(table);
  std::string line;
  std::getline(in, line);  // the header
  uint64_t n = 0;
  while (std::getline(in, line)) {
    // sl local rem st tx:rx tr:when retrnsmt uid timeout inode ...
    std::istringstream row(line);
    std::string sl, local, remote, state, queues, timer, retransmits;
    uint64_t uid = 0, timeout = 0, inode = 0;
    row >> sl >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >>
        inode;
    if (row && state == "01" && mine.count(inode))
      ++n;
  }
  return n;
}

}  // namespace

process_reading read_process() {
  process_reading r;
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  if (statm >> size >> resident)
    r.resident_bytes = resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  auto mine = socket_inodes(r.open_fds);
  if (!mine.empty())
    r.open_connections =
        established("/proc/self/net/tcp", mine) + established("/proc/self/net/tcp6", mine);
  return r;
}

void watch_process(registry& reg, const label_set& labels) {
  auto& rss =
      reg.gauge_at("kvferry_process_resident_bytes", "Resident memory of the process", labels);
  auto& fds =
      reg.gauge_at("kvferry_process_open_fds", "Open file descriptors of the process", labels);
  auto& conns = reg.gauge_at("kvferry_process_open_connections",
                             "Established TCP connections of the process", labels);
  reg.on_collect([&rss, &fds, &conns] {
    auto r = read_process();
    rss.set(static_cast<int64_t>(r.resident_bytes));
    fds.set(static_cast<int64_t>(r.open_fds));
    conns.set(static_cast<int64_t>(r.open_connections));
    return true;
  });
}

}  // namespace kvferry::metrics
