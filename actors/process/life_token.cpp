#include "actors/process/life_token.hpp"

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kvferry {

namespace {

constexpr uint64_t token_magic = 0x6566696c6c66766bULL;  // "kvfllife"
constexpr const char* token_prefix = "kvferry-life-";
constexpr auto watch_tick = std::chrono::milliseconds{200};

/// The shared page of a token. `magic` is written last by the holder, once
/// it holds the mutex: a watcher that reads it may block on the mutex.
struct token_page {
  std::atomic<uint64_t> magic;
  int32_t pid;
  std::atomic<uint32_t> ended;
  pthread_mutex_t mutex;
};
static_assert(sizeof(token_page) <= 4096);

/// A mapping of a token's page (the holder's or a watcher's).
struct mapped_page {
  token_page* page = nullptr;

  mapped_page() = default;
  mapped_page(const mapped_page&) = delete;
  mapped_page& operator=(const mapped_page&) = delete;
  ~mapped_page() {
    if (page)
      ::munmap(page, sizeof(token_page));
  }

  /// Maps the token `name` (without its leading '/'); `create`: a new one.
  bool open(const std::string& name, bool create, std::string* why) {
    auto path = "/" + name;
    int fd = create ? ::shm_open(path.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600)
                    : ::shm_open(path.c_str(), O_RDWR | O_CLOEXEC, 0);
    if (fd < 0) {
      if (why)
        *why = "shm_open of " + path + ": " + std::strerror(errno);
      return false;
    }
    struct stat st {};
    bool sized = create ? ::ftruncate(fd, sizeof(token_page)) == 0
                        : ::fstat(fd, &st) == 0 && st.st_size >= off_t{sizeof(token_page)};
    if (!sized) {
      if (why)
        *why = path + " is not a life token";
      ::close(fd);
      return false;
    }
    void* p = ::mmap(nullptr, sizeof(token_page), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) {
      if (why)
        *why = "mmap of " + path + ": " + std::strerror(errno);
      return false;
    }
    page = static_cast<token_page*>(p);
    return true;
  }
};

/// Tokens of processes that are gone (killed with no watcher to clear them,
/// or ended without removing theirs): removed, so that /dev/shm does not
/// fill with them. A token whose mutex is held belongs to a live process.
void sweep_stale_tokens() {
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator{"/dev/shm", ec}) {
    auto name = e.path().filename().string();
    if (name.rfind(token_prefix, 0) != 0)
      continue;
    mapped_page m;
    if (!m.open(name, false, nullptr) || m.page->magic.load() != token_magic)
      continue;
    int rc = ::pthread_mutex_trylock(&m.page->mutex);
    if (rc == EOWNERDEAD)
      ::pthread_mutex_consistent(&m.page->mutex);
    if (rc == EOWNERDEAD || rc == 0) {
      ::pthread_mutex_unlock(&m.page->mutex);
      ::shm_unlink(("/" + name).c_str());
    }
  }
}

}  // namespace

const std::string& this_host_id() {
  static const std::string id = [] {
    std::ifstream in{"/proc/sys/kernel/random/boot_id"};
    std::string s;
    std::getline(in, s);
    return s;
  }();
  return id;
}

// -- holding --------------------------------------------------------------------

/// A token held by a thread that lives until the token is let go: the
/// thread locks the mutex, and unlocks it (marked ended) when asked.
struct life_token::state {
  mapped_page mapping;
  life_token_ref where;
  std::mutex mu;
  std::condition_variable cv;
  bool held = false;
  bool end = false;
  bool released = false;

  void keep() {
    auto* page = mapping.page;
    ::pthread_mutex_lock(&page->mutex);
    page->magic.store(token_magic);
    std::unique_lock<std::mutex> lock{mu};
    held = true;
    cv.notify_all();
    cv.wait(lock, [this] { return end; });
    page->ended.store(1);
    ::pthread_mutex_unlock(&page->mutex);
    ::shm_unlink(("/" + where.name).c_str());
    released = true;
    cv.notify_all();
  }
};

std::unique_ptr<life_token> life_token::take() {
  auto st = std::make_unique<state>();
  std::random_device rd;
  auto nonce = (uint64_t{rd()} << 32) | rd();
  st->where.name = token_prefix + std::to_string(::getpid()) + "-" + std::to_string(nonce);
  sweep_stale_tokens();
  if (!st->mapping.open(st->where.name, true, nullptr))
    return nullptr;
  auto* page = st->mapping.page;
  page->pid = static_cast<int32_t>(::getpid());
  page->ended.store(0);
  pthread_mutexattr_t attr;
  ::pthread_mutexattr_init(&attr);
  ::pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  ::pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  ::pthread_mutex_init(&page->mutex, &attr);
  ::pthread_mutexattr_destroy(&attr);
  st->where.host = this_host_id();
  auto* raw = st.get();
  std::thread{[raw] { raw->keep(); }}.detach();
  std::unique_lock<std::mutex> lock{raw->mu};
  raw->cv.wait(lock, [raw] { return raw->held; });
  lock.unlock();
  return std::unique_ptr<life_token>{new life_token{std::move(st)}};
}

life_token::life_token(std::unique_ptr<state> s) : state_(std::move(s)) {}

life_token::~life_token() {
  end();
  // The keeper thread is done with the state only once it released: after a
  // timeout (a stuck thread) it is left to the process rather than freed.
  std::unique_lock<std::mutex> lock{state_->mu};
  if (!state_->released) {
    lock.unlock();
    (void)state_.release();
  }
}

const life_token_ref& life_token::where() const {
  return state_->where;
}

void life_token::end() {
  std::unique_lock<std::mutex> lock{state_->mu};
  if (!state_->held || state_->end)
    return;
  state_->end = true;
  state_->cv.notify_all();
  state_->cv.wait_for(lock, std::chrono::seconds{1}, [this] { return state_->released; });
}

namespace {

/// This process's token: taken once, let go at a normal exit.
life_token* the_token() {
  static life_token* t = [] {
    auto made = life_token::take();
    if (made)
      std::atexit([] { end_this_process_life(); });
    return made.release();  // lives until the process ends: its thread uses it
  }();
  return t;
}

}  // namespace

const life_token_ref& this_process_life() {
  static const life_token_ref none;
  auto* t = the_token();
  return t ? t->where() : none;
}

void end_this_process_life() {
  if (auto* t = the_token())
    t->end();
}

// -- watching -------------------------------------------------------------------

struct life_watch::entry {
  std::string name;
  mapped_page mapping;
  on_end f;
  std::atomic<bool> stop{false};
};

life_watch::~life_watch() {
  for (auto& e : watched_)
    e->stop.store(true);
}

/// The watch thread's loop: blocked on the token's mutex until its holder
/// dies or ends, looking every tick whether the watch is still wanted; tells
/// `e->f` once (true: the holder died).
void life_watch::watch_until_end(const std::shared_ptr<entry>& e) {
  auto* m = &e->mapping.page->mutex;
  for (;;) {
    timespec ts{};
    ::clock_gettime(CLOCK_REALTIME, &ts);
    auto ns = ts.tv_nsec + std::chrono::nanoseconds{watch_tick}.count();
    ts.tv_sec += ns / 1'000'000'000;
    ts.tv_nsec = ns % 1'000'000'000;
    int rc = ::pthread_mutex_timedlock(m, &ts);
    if (rc == ETIMEDOUT) {
      if (e->stop.load())
        return;
      continue;
    }
    if (rc == EOWNERDEAD) {
      // The first to see the death tidies up after the holder.
      ::pthread_mutex_consistent(m);
      ::pthread_mutex_unlock(m);
      ::shm_unlink(("/" + e->name).c_str());
      if (!e->stop.load())
        e->f(true);
      return;
    }
    if (rc == 0) {
      // Ended in order, or dead and tidied up by another watcher already.
      bool ended = e->mapping.page->ended.load() != 0;
      ::pthread_mutex_unlock(m);
      if (!e->stop.load())
        e->f(!ended);
      return;
    }
    return;  // not recoverable: nothing to tell
  }
}

bool life_watch::watch(const life_token_ref& where, on_end f, std::string* why) {
  auto say = [&](std::string text) {
    if (why)
      *why = std::move(text);
    return false;
  };
  if (where.empty())
    return say("no life token");
  if (where.host.empty() || where.host != this_host_id())
    return say("its life token is on another host");
  if (where.name == this_process_life().name)
    return say("it is this process");
  for (auto& e : watched_)
    if (e->name == where.name)
      return true;
  auto e = std::make_shared<entry>();
  e->name = where.name;
  e->f = std::move(f);
  std::string err;
  if (!e->mapping.open(where.name, false, &err))
    return say(err);
  if (e->mapping.page->magic.load() != token_magic)
    return say(where.name + " is not a life token yet");
  std::thread{[e] { watch_until_end(e); }}.detach();
  watched_.push_back(std::move(e));
  return true;
}

void life_watch::forget(const std::string& name) {
  std::erase_if(watched_, [&](const std::shared_ptr<entry>& e) {
    if (e->name != name)
      return false;
    e->stop.store(true);
    return true;
  });
}

}  // namespace kvferry
