#include "apps/ctl/cluster_top.hpp"

#include <poll.h>
#include <signal.h>
#include <termios.h>
#include <unistd.h>

#include <httplib.h>

#include <atomic>
#include <cstdio>
#include <ctime>
#include <ostream>
#include <set>
#include <tuple>

namespace kvferry::ctl {

namespace {

/// A rank's row key: instance, role, tp, pp.
using rank_key = std::tuple<std::string, std::string, std::string, std::string>;

struct row {
  double rooms = 0;  // concluded, both outcomes
  double failed = 0;
  double bytes = 0;  // posted by a prefill rank
  double in_flight = 0;
  double peers_down = -1;  // deciders only (per instance)
};

std::string label(const prom::prom_sample& s, const std::string& k) {
  auto i = s.labels.find(k);
  return i == s.labels.end() ? std::string{} : i->second;
}

/// Every rank's counters in one sample, and each instance's peers down.
std::map<rank_key, row> rows_of(const top_sample& s) {
  std::map<rank_key, row> out;
  for (auto& [node, e] : s.nodes)
    for (auto& smp : e.samples) {
      auto inst = label(smp, "kv_instance");
      if (inst.empty())
        continue;
      rank_key k{inst, label(smp, "role"), label(smp, "tp"), label(smp, "pp")};
      if (smp.name == "kvferry_rooms_total") {
        out[k].rooms += smp.value;
        if (label(smp, "outcome") == "failed")
          out[k].failed += smp.value;
      } else if (smp.name == "kvferry_rooms_in_flight") {
        out[k].in_flight += smp.value;
      } else if (smp.name == "kvferry_transfer_bytes_total") {
        std::get<1>(k) = "prefill";
        out[k].bytes += smp.value;
      } else if (smp.name == "kvferry_peer_up") {
        // The decider's view, shown on its instance's line.
        auto& r = out[rank_key{inst, "decode", "", ""}];
        r.peers_down = std::max(0.0, r.peers_down) + (smp.value == 0 ? 1 : 0);
      }
    }
  return out;
}

std::string cell(double v, const char* fmt) {
  char buf[32];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

volatile sig_atomic_t stop_asked = 0;
void on_stop(int) {
  stop_asked = 1;
}

/// The terminal in raw mode (no echo, a key at a time) on the alternate
/// screen, restored on destruction.
struct raw_terminal {
  termios saved{};
  bool on = false;
  std::ostream& out;
  explicit raw_terminal(std::ostream& o) : out(o) {
    if (!::isatty(STDIN_FILENO) || !::isatty(STDOUT_FILENO) || ::tcgetattr(STDIN_FILENO, &saved))
      return;
    termios raw = saved;
    raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    ::tcsetattr(STDIN_FILENO, TCSANOW, &raw);
    on = true;
    out << "\x1b[?1049h\x1b[?25l" << std::flush;  // alternate screen, cursor hidden
  }
  ~raw_terminal() {
    if (!on)
      return;
    out << "\x1b[?25h\x1b[?1049l" << std::flush;
    ::tcsetattr(STDIN_FILENO, TCSANOW, &saved);
  }
};

}  // namespace

top_sample scrape_cluster(const launch::cluster_spec& c, std::chrono::milliseconds timeout) {
  top_sample s;
  s.at = std::chrono::steady_clock::now();
  for (auto& n : c.nodes) {
    if (n.metrics_port == 0) {
      s.errors[n.name] = "no metrics_port in the file";
      continue;
    }
    httplib::Client cli{n.host, n.metrics_port};
    auto secs = timeout.count() / 1000;
    auto usecs = (timeout.count() % 1000) * 1000;
    cli.set_connection_timeout(secs, usecs);
    cli.set_read_timeout(secs, usecs);
    auto res = cli.Get("/metrics");
    if (!res || res->status != 200) {
      s.errors[n.name] = "metrics unreachable at " + n.host + ":" + std::to_string(n.metrics_port) +
                         (res ? " (HTTP " + std::to_string(res->status) + ")"
                              : " (" + httplib::to_string(res.error()) + ")");
      continue;
    }
    try {
      s.nodes[n.name] = prom::parse_prometheus(res->body);
    } catch (const std::exception& e) {
      s.errors[n.name] = std::string{"metrics not in Prometheus' format: "} + e.what();
    }
  }
  return s;
}

std::vector<std::string> top_table(const launch::cluster_spec& c, const top_sample& before,
                                   const top_sample& now) {
  auto was = rows_of(before);
  auto is = rows_of(now);
  double secs = std::chrono::duration<double>(now.at - before.at).count();
  bool rates = !before.nodes.empty() && secs > 0;
  std::vector<std::string> lines;
  char head[160];
  std::snprintf(head, sizeof head, "%-14s %-8s %-9s %9s %8s %10s %9s %11s", "INSTANCE", "ROLE",
                "RANK", "ROOMS/S", "GB/S", "IN FLIGHT", "FAILED/S", "PEERS DOWN");
  lines.push_back(head);
  // Instance lines (sums), each followed by its ranks.
  std::map<std::string, std::vector<rank_key>> by_instance;
  for (auto& [k, r] : is)
    by_instance[std::get<0>(k)].push_back(k);
  for (auto& [inst, keys] : by_instance) {
    row sum, sum_was;
    std::string role;
    for (auto& k : keys) {
      auto& r = is[k];
      if (!std::get<1>(k).empty() && role.empty())
        role = std::get<1>(k);
      sum.rooms += r.rooms;
      sum.failed += r.failed;
      sum.bytes += r.bytes;
      sum.in_flight += r.in_flight;
      if (r.peers_down >= 0)
        sum.peers_down = std::max(0.0, sum.peers_down) + r.peers_down;
      if (auto w = was.find(k); w != was.end()) {
        sum_was.rooms += w->second.rooms;
        sum_was.failed += w->second.failed;
        sum_was.bytes += w->second.bytes;
      }
    }
    auto line = [&](const std::string& name, const std::string& rl, const std::string& rank,
                    const row& r, const row* w, bool prefill) {
      auto rate = [&](double a, double b, const char* fmt) {
        return rates && w ? cell((a - b) / secs, fmt) : std::string{"-"};
      };
      char buf[200];
      std::snprintf(buf, sizeof buf, "%-14s %-8s %-9s %9s %8s %10s %9s %11s", name.c_str(),
                    rl.c_str(), rank.c_str(), rate(r.rooms, w ? w->rooms : 0, "%.1f").c_str(),
                    prefill ? rate(r.bytes / 1e9, w ? w->bytes / 1e9 : 0, "%.3f").c_str() : "-",
                    cell(r.in_flight, "%.0f").c_str(),
                    rate(r.failed, w ? w->failed : 0, "%.1f").c_str(),
                    r.peers_down >= 0 ? cell(r.peers_down, "%.0f").c_str() : "-");
      lines.push_back(buf);
    };
    line(inst, role, "all", sum, &sum_was, role == "prefill");
    for (auto& k : keys) {
      if (std::get<2>(k).empty())
        continue;  // the decider's line: counted in the instance's
      auto w = was.find(k);
      line("", "", "tp" + std::get<2>(k) + " pp" + std::get<3>(k), is[k],
           w == was.end() ? nullptr : &w->second, std::get<1>(k) == "prefill");
    }
  }
  for (auto& [node, why] : now.errors)
    lines.push_back("node " + node + ": " + why);
  if (is.empty() && now.errors.size() < c.nodes.size())
    lines.push_back("(no rank has reported figures yet)");
  return lines;
}

int run_top(const launch::cluster_spec& c, uint32_t iterations, std::ostream& out) {
  bool any = false;
  for (auto& n : c.nodes)
    any |= n.metrics_port != 0;
  if (!any) {
    out << "kvferry-ctl top: no [[node]] of " << c.file
        << " has a metrics_port; expected metrics_port = PORT in the nodes to watch\n";
    return 1;
  }
  struct sigaction sa {};
  sa.sa_handler = on_stop;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  raw_terminal term{out};
  top_sample before;
  for (uint32_t k = 0; (iterations == 0 || k < iterations) && !stop_asked; ++k) {
    auto now = scrape_cluster(c, std::chrono::milliseconds{900});
    auto lines = top_table(c, before, now);
    std::time_t t = std::time(nullptr);
    char clock[32];
    std::strftime(clock, sizeof clock, "%H:%M:%S", std::localtime(&t));
    if (term.on)
      out << "\x1b[H\x1b[2J";  // draw over the last table
    out << "kvferry top: " << c.file << "  " << clock << "  (every 1 s"
        << (term.on ? "; q quits)" : ")") << (term.on ? "\r\n" : "\n");
    for (auto& l : lines)
      out << l << (term.on ? "\r\n" : "\n");
    if (!term.on)
      out << "\n";
    out << std::flush;
    before = std::move(now);
    if (iterations != 0 && k + 1 == iterations)
      break;
    // Wait out the second, reading keys: q quits.
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds{1};
    while (!stop_asked && std::chrono::steady_clock::now() < until) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                      until - std::chrono::steady_clock::now())
                      .count();
      pollfd p{STDIN_FILENO, POLLIN, 0};
      if (!term.on) {
        ::poll(nullptr, 0, static_cast<int>(std::max<int64_t>(left, 0)));
        continue;
      }
      if (::poll(&p, 1, static_cast<int>(std::max<int64_t>(left, 0))) > 0) {
        char ch = 0;
        if (::read(STDIN_FILENO, &ch, 1) == 1 && (ch == 'q' || ch == 'Q'))
          stop_asked = 1;
      }
    }
  }
  return 0;
}

}  // namespace kvferry::ctl
