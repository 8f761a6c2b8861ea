// Fences: the receiving side's guard against writes after release. A batch
// carries a token; the receiver writes it only while the token is open, and
// counts it in progress while it writes, so closing a token tells whether
// anything with it can still land. Used by every backend.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <set>

namespace kvferry::transport {

class fence_table {
 public:
  /// Token 0 is "no fence": always admitted.
  void open(uint64_t token);

  /// Stops admitting `token`; true when no batch with it is in progress.
  bool close(uint64_t token);

  /// Admits a batch with `token` (counted in progress); false if closed or
  /// never opened.
  bool enter(uint64_t token);

  /// Ends a batch admitted by enter().
  void leave(uint64_t token);

 private:
  std::mutex mu_;
  std::set<uint64_t> open_;
  std::map<uint64_t, uint32_t> busy_;
};

/// Admission of one batch: leaves the fence when it goes out of scope.
class fence_pass {
 public:
  fence_pass(fence_table& t, uint64_t token) : t_(t), token_(token), ok_(t.enter(token)) {}
  fence_pass(const fence_pass&) = delete;
  fence_pass& operator=(const fence_pass&) = delete;
  ~fence_pass() {
    if (ok_)
      t_.leave(token_);
  }
  bool admitted() const { return ok_; }

 private:
  fence_table& t_;
  uint64_t token_;
  bool ok_;
};

}  // namespace kvferry::transport
