#include "apps/common/failover_run.hpp"

#include <algorithm>
#include <memory>
#include <regex>
#include <sstream>
#include <thread>

#include <signal.h>

#include "apps/common/child_process.hpp"
#include "messages/wall_clock.hpp"

namespace kvferry::apps {

namespace {

using namespace std::chrono_literals;

/// Reads "conclusion <instance> tpT ppP room R <state> <at_ns> <why>" lines.
void read_conclusions(const std::string& out, failover_result& r) {
  std::istringstream in{out};
  static const std::regex line{R"(^conclusion (\S+ tp\d+ pp\d+) room (\d+) (\S+) (\d+) (.*)$)"};
  static const std::regex opened{R"(^opened decode room (\d+) (\d+)$)"};
  for (std::string l; std::getline(in, l);) {
    std::smatch m;
    if (std::regex_match(l, m, opened)) {
      r.decode_opened_ns[std::stoull(m[1])] = std::stoll(m[2]);
      continue;
    }
    if (!std::regex_match(l, m, line))
      continue;
    r.rooms[std::stoull(m[2])].push_back({m[1], m[3], std::stoll(m[4]), m[5]});
  }
}

}  // namespace

std::vector<uint64_t> failover_result::struck(bool as_opened, bool failed) const {
  std::vector<uint64_t> out;
  for (auto& [room, cs] : rooms) {
    bool after = std::any_of(cs.begin(), cs.end(), [&](auto& c) { return c.at_ns >= strike_ns; });
    if (failed && std::none_of(cs.begin(), cs.end(), [](auto& c) { return c.state == "Failed"; }))
      continue;
    if (after && (as_opened ? opened_at(room) : opened_ns(room)) < strike_ns)
      out.push_back(room);
  }
  return out;
}

double failover_result::strike_to_all_concluded_ms(bool as_opened, bool failed) const {
  int64_t last = strike_ns;
  for (auto room : struck(as_opened, failed))
    for (auto& c : rooms.at(room))
      last = std::max(last, c.at_ns);
  return (last - strike_ns) / 1e6;
}

bool concluded_alone(const rank_conclusion& c) {
  return c.state == "Failed" && c.why.find("no decode rank asked for it") != std::string::npos;
}

namespace {

/// Appends how the ranks of `room` disagree to `out`. A rank that concluded
/// alone only has to conclude Failed: a Success beside it disagrees.
void add_disagreements(uint64_t room, const std::vector<rank_conclusion>& cs,
                       std::vector<std::string>& out) {
  auto ref = std::find_if(cs.begin(), cs.end(), [&](auto& c) { return !concluded_alone(c); });
  if (ref == cs.end())
    return;
  for (auto& c : cs)
    if (concluded_alone(c) ? ref->state != "Failed" : (c.state != ref->state || c.why != ref->why))
      out.push_back("room " + std::to_string(room) + ": " + c.rank + " " + c.state + " " + c.why +
                    " / " + ref->rank + " " + ref->state + " " + ref->why);
}

}  // namespace

std::vector<std::string> failover_result::disagreements() const {
  std::vector<std::string> out;
  for (auto room : struck())
    add_disagreements(room, rooms.at(room), out);
  return out;
}

std::vector<std::string> failover_result::disagreements_in_every_room() const {
  std::vector<std::string> out;
  for (auto& [room, cs] : rooms)
    add_disagreements(room, cs, out);
  return out;
}

uint32_t failover_result::successes_after(int64_t after_ns, size_t ranks) const {
  uint32_t n = 0;
  for (auto& [room, cs] : rooms) {
    if (cs.size() == ranks && opened_ns(room) > after_ns &&
        std::all_of(cs.begin(), cs.end(), [](auto& c) { return c.state == "Success"; }))
      ++n;
  }
  return n;
}

std::vector<double> failover_result::fail_fast_ms(int64_t after_ns, int64_t before_ns) const {
  std::vector<double> out;
  for (auto& [room, cs] : rooms) {
    auto opened = opened_at(room);
    if (opened <= after_ns || opened >= before_ns || cs.empty() ||
        !std::all_of(cs.begin(), cs.end(), [](auto& c) { return c.state == "Failed"; }))
      continue;
    int64_t last = opened;
    for (auto& c : cs)
      last = std::max(last, c.at_ns);
    out.push_back((last - opened) / 1e6);
  }
  return out;
}

double failover_result::first_success_after_ms(int64_t since_ns, size_t ranks) const {
  for (auto& [room, cs] : rooms) {  // by room id: by opening time
    if (opened_ns(room) <= since_ns || cs.size() != ranks ||
        !std::all_of(cs.begin(), cs.end(), [](auto& c) { return c.state == "Success"; }))
      continue;
    int64_t last = since_ns;
    for (auto& c : cs)
      last = std::max(last, c.at_ns);
    return (last - since_ns) / 1e6;
  }
  return -1;
}

failover_result run_failover(const failover_options& o) {
  failover_result r;
  r.interval_ns = int64_t{o.interval_us} * 1000;
  std::vector<std::string> common{"--prefill-tp=2",
                                  "--decode-tp=2",
                                  "--model=" + o.model,
                                  "--rooms=" + std::to_string(o.rooms),
                                  "--interval-us=" + std::to_string(o.interval_us),
                                  "--print-conclusions",
                                  "--kvferry.bootstrap-timeout=3s",
                                  "--kvferry.log-level=" + o.log_level};
  common.insert(common.end(), o.extra.begin(), o.extra.end());
  auto lag = std::chrono::duration_cast<std::chrono::nanoseconds>(o.prefill_lag).count();
  // The first processes read the epoch from stdin once every one of them is
  // ready (ranks up, memory touched: seconds on a machine whose memory is
  // handed out lazily), so no room's time passes while one still starts.
  // A process that replaces a struck one is told the epoch the run has.
  bool again = false;
  auto argv = [&](std::vector<std::string> own) {
    bool prefill = own.front() == "--role=prefill";
    own.insert(own.begin(), o.demo);
    own.push_back(again ? "--epoch-ns=" + std::to_string(prefill ? r.epoch_ns + lag : r.epoch_ns)
                        : "--epoch-from-stdin");
    own.insert(own.end(), common.begin(), common.end());
    return own;
  };
  // The first prefill process hosts the bootstrap: on any free port at the
  // start, on the same port when a new incarnation replaces the instance.
  std::string port = "0";
  // A prefill process that replaces a struck one opens the rooms decode asks
  // for, not those its clock has passed (--follow-requests): a room decode
  // failed at once while the instance was down is not opened there to wait
  // alone for its deadline.
  auto replacing = [&](std::vector<std::string> own) {
    if (again)
      own.push_back("--follow-requests");
    return argv(std::move(own));
  };
  auto bootstrap_process = [&]() -> std::unique_ptr<child_process> {
    auto p = std::make_unique<child_process>(
        replacing({"--role=prefill", "--ranks=0", "--bootstrap-port=" + port}));
    auto line = p->wait_for_line(
        [](const std::string& l) { return l.find("bootstrap listening on") != std::string::npos; },
        60s);
    std::smatch m;
    if (!line || !std::regex_search(*line, m, std::regex{R"(:(\d+)$)"})) {
      r.error = "a prefill process did not print its bootstrap port:\n" + p->output();
      return nullptr;
    }
    port = m[1];
    return p;
  };
  auto first = bootstrap_process();
  if (!first)
    return r;
  auto rank1 = [&] {
    std::vector<std::string> own{"--role=prefill", "--ranks=1", "--join-bootstrap",
                                 "--bootstrap-port=" + port};
    if (o.hold_mib > 0 && !again)
      own.push_back("--hold-mib=" + std::to_string(o.hold_mib));
    return std::make_unique<child_process>(replacing(std::move(own)));
  };
  auto decode_process = [&] {
    return std::make_unique<child_process>(argv({"--role=decode", "--bootstrap-port=" + port}));
  };
  auto second = rank1();
  auto decode = decode_process();
  // Up: ranks started; the time it took is not the run's.
  auto ready = [&](child_process& p, const char* who) {
    if (p.wait_for_line([](const std::string& l) { return l.rfind("ready ", 0) == 0; }, 120s))
      return true;
    r.error = std::string{"the "} + who + " process was not ready within 120 s:\n" + p.output();
    return false;
  };
  if (!ready(*first, "first prefill") || !ready(*second, "second prefill") ||
      !ready(*decode, "decode"))
    return r;
  r.epoch_ns = wall_ns() + std::chrono::duration_cast<std::chrono::nanoseconds>(o.lead).count();
  if (!decode->write_stdin(std::to_string(r.epoch_ns) + "\n") ||
      !first->write_stdin(std::to_string(r.epoch_ns + lag) + "\n") ||
      !second->write_stdin(std::to_string(r.epoch_ns + lag) + "\n")) {
    r.error = "a process exited before it was told the epoch";
    return r;
  }
  std::this_thread::sleep_until(std::chrono::system_clock::time_point{
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::nanoseconds{r.epoch_ns}) +
      o.strike_after});
  // ... and not before the decode process saw a room succeed: a fault struck
  // before any room moved would hit none.
  if (!decode->wait_for_line([](const std::string& l) { return l.rfind("first success ", 0) == 0; },
                             60s)) {
    r.error = "the decode process saw no room succeed within 60 s of the first room's time:\n" +
              decode->output();
    return r;
  }
  // The struck processes move out of `first`, `second`, `decode`; the new
  // ones take their places there.
  std::vector<std::unique_ptr<child_process>> struck;
  if (o.target == fault_target::prefill_instance) {
    struck.push_back(std::move(first));
    struck.push_back(std::move(second));
  } else if (o.target == fault_target::decode_instance) {
    struck.push_back(std::move(decode));
  } else {
    struck.push_back(std::move(second));
  }
  r.strike_ns = wall_ns();
  for (auto& p : struck)
    ::kill(p->pid(), o.signal);
  bool reaped = false;  // no signal to a pid that is gone (it may be reused)
  again = true;
  if (o.restart) {
    if (o.target == fault_target::prefill_instance) {
      // The killed processes are reaped first: a new bootstrap binds the port
      // of the old one.
      for (auto& p : struck)
        p->wait(5s);
      reaped = true;
      first = bootstrap_process();
      if (!first)
        return r;  // the error says why; the other processes are killed
      r.restarted_ns = wall_ns();
      second = rank1();
    } else if (o.target == fault_target::decode_instance) {
      r.restarted_ns = wall_ns();
      decode = decode_process();
    } else {
      r.restarted_ns = wall_ns();
      second = rank1();
    }
  }
  if (o.restart) {
    // When the new processes' ranks were up (their memory touched): what a
    // check of the rooms served after the restart counts from.
    std::vector<child_process*> fresh;
    if (o.target == fault_target::prefill_instance)
      fresh = {first.get(), second.get()};
    else if (o.target == fault_target::decode_instance)
      fresh = {decode.get()};
    else
      fresh = {second.get()};
    for (auto* p : fresh)
      if (!p->wait_for_line([](const std::string& l) { return l.rfind("ready ", 0) == 0; }, 120s)) {
        r.error = "a restarted process was not ready within 120 s:\n" + p->output();
        return r;
      }
    r.replacement_ready_ns = wall_ns();
  }
  auto patience = std::chrono::milliseconds{o.rooms * o.interval_us / 1000} + 60s;
  for (auto* p : {decode.get(), first.get(), second.get()})
    if (p)
      p->wait(patience);
  for (auto& p : struck) {
    if (!reaped)
      ::kill(p->pid(), SIGKILL);  // a frozen one is let go now
    p->wait(5s);
    r.struck_outputs.push_back(p->output());
  }
  for (auto* p : {decode.get(), first.get(), second.get()})
    if (p) {
      read_conclusions(p->output(), r);
      r.outputs.push_back(p->output());
    }
  return r;
}

}  // namespace kvferry::apps
