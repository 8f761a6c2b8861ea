#include "apps/launch/stop_signals.hpp"

#include <csignal>
#include <ctime>

#include <pthread.h>

namespace kvferry::launch {

void block_stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

bool took_signal(std::chrono::milliseconds timeout) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  timespec ts{static_cast<time_t>(timeout.count() / 1000),
              static_cast<long>(timeout.count() % 1000) * 1'000'000};
  return sigtimedwait(&set, nullptr, &ts) > 0;
}

}  // namespace kvferry::launch
