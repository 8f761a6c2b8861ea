#include "actors/process/caf_port_guard.hpp"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include <caf/io/basp/header.hpp>

#include "actors/base/log.hpp"
#include "actors/process/basp_frames.hpp"

namespace kvferry {

namespace {

using clock_type = std::chrono::steady_clock;

template <class Fn>
Fn next_definition(const char* name) {
  return reinterpret_cast<Fn>(::dlsym(RTLD_NEXT, name));
}

/// A connection a guarded port accepted.
struct connection {
  std::string source;
  bool tls = false;
  clock_type::time_point accepted;
  basp_frame_watch frames;
  bool refused = false;  ///< shut down by the guard; CAF closes it next
};

/// Descriptors beyond this are not tracked (the total cap keeps the guarded
/// ones far below it).
constexpr int table_size = 1 << 16;

/// The guard's state, made once and never destroyed: the calls it takes over
/// may come from threads that outlive static destruction.
struct guard_state {
  std::mutex mu;
  caf_port_limits limits;
  std::map<uint16_t, bool> ports;  ///< guarded port -> its connections speak TLS
  std::map<int, std::unique_ptr<connection>> tracked;
  std::map<std::string, uint32_t> per_source;
  caf_port_refusals refusals;
  std::set<std::string> said;  ///< kind and source already logged
  bool sweeping = false;
};

guard_state& state() {
  static auto* st = new guard_state;
  return *st;
}

/// Set for a descriptor the guard tracks: recv's one check on every socket.
std::array<std::atomic<bool>, table_size>& tracked_fds() {
  static auto* t = new std::array<std::atomic<bool>, table_size>{};
  return *t;
}

std::atomic<bool> any_port{false};
std::atomic<bool> guard_on{true};
/// The payload cap, read on every BASP header (a copy of limits.max_payload).
std::atomic<uint32_t> max_payload{default_max_basp_payload};

bool is_tracked(int fd) {
  return fd >= 0 && fd < table_size && tracked_fds()[fd].load(std::memory_order_acquire);
}

/// Logs `what` once per kind and source (at most 256 lines in all).
void say_once(guard_state& st, const std::string& kind, const std::string& source,
              const std::string& what) {
  if (st.said.size() >= 256 || !st.said.insert(kind + " " + source).second)
    return;
  log().warn("caf port guard: {} (source {}); further ones of this kind from it are counted only",
             what, source);
}

/// Forgets `fd` (lock held): CAF closed it.
void forget(guard_state& st, int fd) {
  auto i = st.tracked.find(fd);
  if (i == st.tracked.end())
    return;
  if (auto s = st.per_source.find(i->second->source); s != st.per_source.end() && --s->second == 0)
    st.per_source.erase(s);
  st.tracked.erase(i);
  tracked_fds()[fd].store(false, std::memory_order_release);
}

/// Shuts connection `fd` down (lock held): CAF reads its end and closes it.
void refuse(guard_state& st, int fd, connection& c, const std::string& kind,
            const std::string& what) {
  c.refused = true;
  ::shutdown(fd, SHUT_RDWR);
  say_once(st, kind, c.source, what);
}

std::string peer_of(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0)
    return "unknown";
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET)
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&ss)->sin_addr, buf, sizeof buf);
  else if (ss.ss_family == AF_INET6)
    ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr, buf, sizeof buf);
  else
    return "local";
  return buf;
}

/// The port listening socket `fd` is bound to (0 if none).
uint16_t local_port(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0)
    return 0;
  if (ss.ss_family == AF_INET)
    return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6)
    return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return 0;
}

/// The deadline of handshakes: every fifth of a second, a connection that
/// has not completed its BASP handshake within the limit is shut down.
void sweep() {
  auto& st = state();
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds{200});
    std::lock_guard<std::mutex> lock{st.mu};
    auto now = clock_type::now();
    for (auto& [fd, c] : st.tracked)
      if (!c->refused && !c->frames.handshake_done() && now - c->accepted > st.limits.handshake) {
        ++st.refusals.handshake_late;
        refuse(st, fd, *c, "late",
               "a connection to a CAF port did not complete its BASP handshake within " +
                   std::to_string(st.limits.handshake.count()) + " ms (" +
                   std::to_string(c->frames.frames()) + " whole frames in): closed");
      }
  }
}

/// Admits connection `fd`, just accepted on guarded port `port`; false (and
/// counted) when a cap is reached.
bool admit(int fd, bool tls) {
  auto& st = state();
  auto source = peer_of(fd);
  std::lock_guard<std::mutex> lock{st.mu};
  if (st.tracked.size() >= st.limits.total) {
    ++st.refusals.over_total_cap;
    say_once(st, "total", source,
             "a connection to a CAF port refused: " + std::to_string(st.tracked.size()) +
                 " are open, the cap (caf_port_limits::total) is " +
                 std::to_string(st.limits.total));
    return false;
  }
  auto& mine = st.per_source[source];
  if (mine >= st.limits.per_source) {
    ++st.refusals.over_source_cap;
    say_once(st, "source", source,
             "a connection to a CAF port refused: " + std::to_string(mine) +
                 " are open from this source, the cap (caf_port_limits::per_source) is " +
                 std::to_string(st.limits.per_source));
    if (mine == 0)
      st.per_source.erase(source);
    return false;
  }
  if (fd >= table_size)
    return true;  // not tracked (far beyond the total cap: never in practice)
  ++mine;
  auto c = std::make_unique<connection>();
  c->source = source;
  c->tls = tls;
  c->accepted = clock_type::now();
  c->frames = basp_frame_watch{st.limits.max_payload};
  st.tracked[fd] = std::move(c);
  tracked_fds()[fd].store(true, std::memory_order_release);
  return true;
}

}  // namespace

namespace detail {

/// Reads `n` bytes that CAF is about to get from tracked connection `fd`
/// (`tls`: decrypted by SSL_read); false when the connection was refused:
/// the caller makes CAF's read fail.
bool caf_port_bytes(int fd, const void* data, size_t n, bool tls) {
  auto& st = state();
  std::lock_guard<std::mutex> lock{st.mu};
  auto i = st.tracked.find(fd);
  if (i == st.tracked.end() || i->second->tls != tls)
    return true;
  auto& c = *i->second;
  if (c.refused)
    return false;
  if (c.frames.feed(data, n) == basp_frame_watch::fault::none)
    return true;
  auto oversized = c.frames.found() == basp_frame_watch::fault::oversized;
  ++(oversized ? st.refusals.oversized : st.refusals.malformed);
  refuse(st, fd, c, oversized ? "oversized" : "malformed",
         c.frames.describe() + " on a CAF port: the connection is closed before CAF reads it");
  return false;
}

bool caf_port_tracked(int fd) {
  return is_tracked(fd);
}

}  // namespace detail

void set_caf_port_limits(const caf_port_limits& limits) {
  auto& st = state();
  std::lock_guard<std::mutex> lock{st.mu};
  st.limits = limits;
  max_payload.store(limits.max_payload, std::memory_order_relaxed);
}

caf_port_limits caf_port_limits_now() {
  auto& st = state();
  std::lock_guard<std::mutex> lock{st.mu};
  return st.limits;
}

void set_caf_port_guard(bool on) {
  guard_on.store(on);
}

void guard_caf_port(uint16_t port, bool tls) {
  if (!guard_on.load())
    return;
  auto& st = state();
  std::lock_guard<std::mutex> lock{st.mu};
  st.ports[port] = tls;
  any_port.store(true, std::memory_order_release);
  if (!st.sweeping) {
    st.sweeping = true;
    std::thread{sweep}.detach();
  }
}

caf_port_refusals caf_port_refusals_now() {
  auto& st = state();
  std::lock_guard<std::mutex> lock{st.mu};
  return st.refusals;
}

uint32_t caf_port_connections_now() {
  auto& st = state();
  std::lock_guard<std::mutex> lock{st.mu};
  return static_cast<uint32_t>(st.tracked.size());
}

std::string caf_port_guard_gaps() {
  std::string gaps;
  for (auto [name, mine] :
       {std::pair<const char*, void*>{"accept", reinterpret_cast<void*>(&::accept)},
        {"recv", reinterpret_cast<void*>(&::recv)},
        {"close", reinterpret_cast<void*>(&::close)}})
    if (::dlsym(RTLD_DEFAULT, name) != mine)
      gaps += std::string{gaps.empty() ? "" : ", "} + name;
  if (gaps.empty())
    return {};
  return "this process's " + gaps +
         " are not kvferry's (not a kvferry executable): only the BASP payload cap holds on its "
         "CAF ports";
}

void watch_caf_ports(metrics::registry& reg, const metrics::label_set& labels) {
  const char* help =
      "Connections to this process's CAF ports that the guard closed or refused, by kind: "
      "oversized (a BASP header declared more than the cap), malformed, handshake_late, "
      "over_source_cap, over_total_cap";
  auto with = [&](const char* kind) {
    auto l = labels;
    l.emplace_back("kind", kind);
    return &reg.counter_at("kvferry_caf_port_refusals_total", help, l);
  };
  struct counters {
    metrics::counter *oversized, *malformed, *late, *source, *total;
    caf_port_refusals seen;
  };
  auto c = std::make_shared<counters>(counters{with("oversized"),
                                               with("malformed"),
                                               with("handshake_late"),
                                               with("over_source_cap"),
                                               with("over_total_cap"),
                                               {}});
  auto& open = reg.gauge_at("kvferry_caf_port_connections",
                            "Connections open now on this process's CAF ports", labels);
  reg.on_collect([c, &open] {
    auto now = caf_port_refusals_now();
    c->oversized->add(now.oversized - c->seen.oversized);
    c->malformed->add(now.malformed - c->seen.malformed);
    c->late->add(now.handshake_late - c->seen.handshake_late);
    c->source->add(now.over_source_cap - c->seen.over_source_cap);
    c->total->add(now.over_total_cap - c->seen.over_total_cap);
    c->seen = now;
    open.set(static_cast<int64_t>(caf_port_connections_now()));
    return true;
  });
}

}  // namespace kvferry

// -- the calls taken over -------------------------------------------------------

#define KVFERRY_INTERPOSED __attribute__((visibility("default")))

extern "C" {

KVFERRY_INTERPOSED int accept(int listener, sockaddr* addr, socklen_t* len) {
  static auto real = kvferry::next_definition<int (*)(int, sockaddr*, socklen_t*)>("accept");
  static auto real_close = kvferry::next_definition<int (*)(int)>("close");
  for (;;) {
    int fd = real(listener, addr, len);
    if (fd < 0 || !kvferry::any_port.load(std::memory_order_acquire))
      return fd;
    bool tls = false;
    {
      auto& st = kvferry::state();
      auto port = kvferry::local_port(listener);
      std::lock_guard<std::mutex> lock{st.mu};
      auto p = st.ports.find(port);
      if (p == st.ports.end())
        return fd;  // not a guarded port
      tls = p->second;
    }
    if (kvferry::admit(fd, tls))
      return fd;
    real_close(fd);  // refused: the next pending one, if any
  }
}

KVFERRY_INTERPOSED ssize_t recv(int fd, void* buf, size_t n, int flags) {
  static auto real = kvferry::next_definition<ssize_t (*)(int, void*, size_t, int)>("recv");
  auto got = real(fd, buf, n, flags);
  if (got > 0 && !(flags & MSG_PEEK) && kvferry::is_tracked(fd) &&
      !kvferry::detail::caf_port_bytes(fd, buf, static_cast<size_t>(got), false)) {
    errno = ECONNRESET;
    return -1;
  }
  return got;
}

KVFERRY_INTERPOSED int close(int fd) {
  static auto real = kvferry::next_definition<int (*)(int)>("close");
  if (kvferry::is_tracked(fd)) {
    auto& st = kvferry::state();
    std::lock_guard<std::mutex> lock{st.mu};
    kvferry::forget(st, fd);
  }
  return real(fd);
}

}  // extern "C"

// The header check of libcaf_io, called on every BASP header it reads: also
// where no libc call of this process is kvferry's (the Python binding), a
// declared payload above the cap closes the connection (CAF takes a header
// that is not valid for a malformed message) before CAF sizes its buffer.
namespace caf::io::basp {

KVFERRY_INTERPOSED bool valid(const header& hdr) {
  static auto real =
      kvferry::next_definition<bool (*)(const header&)>("_ZN3caf2io4basp5validERKNS1_6headerE");
  auto cap = kvferry::max_payload.load(std::memory_order_relaxed);
  if (hdr.payload_len > cap) {
    auto& st = kvferry::state();
    std::lock_guard<std::mutex> lock{st.mu};
    ++st.refusals.oversized;
    kvferry::say_once(st, "oversized", "a BASP peer",
                      "a BASP header declared a payload of " + std::to_string(hdr.payload_len) +
                          " bytes, expected at most " + std::to_string(cap) +
                          ": CAF closes the connection");
    return false;
  }
  return real(hdr);
}

}  // namespace caf::io::basp
