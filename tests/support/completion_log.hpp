// Collects a transport's completions across threads, for tests.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <vector>

#include "transport/transport.hpp"

namespace kvferry::test {

class completion_log {
 public:
  /// A handler to give to transport::set_completion_handler.
  transport::completion_handler handler() {
    return [this](transport::completion c) {
      std::lock_guard guard{mu_};
      done_.push_back(std::move(c));
      cv_.notify_all();
    };
  }

  /// Waits until `n` completions arrived (or the timeout); returns them all.
  std::vector<transport::completion> wait(size_t n,
                                          std::chrono::milliseconds timeout = std::chrono::seconds{
                                              10}) {
    std::unique_lock guard{mu_};
    cv_.wait_for(guard, timeout, [&] { return done_.size() >= n; });
    return done_;
  }

  size_t size() {
    std::lock_guard guard{mu_};
    return done_.size();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<transport::completion> done_;
};

}  // namespace kvferry::test
