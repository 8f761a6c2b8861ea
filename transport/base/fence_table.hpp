// The fences of one transport: the receiving side's guard on its memory,
// checked by every backend before a batch writes (what a fence admits, the
// grant, is part of the interface: transport/grant.hpp). A batch lands only
// when its fence is open, its connection's sender is one the grant names, and
// every op lies inside granted items; a batch counts in progress while it
// writes, so closing the fence tells whether anything with it can still land.
// Token 0 admits nothing. A refusal names the op and the fence, never a
// region's size.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "transport/grant.hpp"
#include "transport/region.hpp"
#include "transport/status.hpp"

namespace kvferry::transport {

/// Where one op writes, for enter() where a backend's ops name it otherwise.
struct op_span {
  region_id region = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
};

class fence_table {
 public:
  /// `trust_every_peer` (options::trust_every_peer, tests of transport
  /// mechanics only): token 0 and a fence opened with an empty grant admit
  /// any op from anyone; bounds are still checked against the regions.
  explicit fence_table(bool trust_every_peer = false) : trust_(trust_every_peer) {}

  /// Opens fence `token` with what it admits (replacing an earlier grant).
  void open(uint64_t token, grant g = {});

  /// Stops admitting `token`; true when no batch with it is in progress.
  bool close(uint64_t token);

  /// Admits a batch from `sender` with `token` (counted in progress until
  /// leave()): fenced when the fence is not open, not_granted when the
  /// sender or an op is outside its grant. `Ops` have region, offset, length.
  template <class Ops>
  status enter(uint64_t token, const std::string& sender, const Ops& ops) {
    std::lock_guard guard{mu_};
    auto f = admit_locked(token, sender);
    if (!f.ok())
      return f;
    if (auto* g = granted_locked(token)) {
      size_t k = 0;
      for (auto& op : ops) {
        if (auto st = check(*g, token, sender, k, op.region, op.offset, op.length); !st.ok())
          return st;
        ++k;
      }
    }
    ++busy_[token];
    return {};
  }

  /// Ends a batch admitted by enter().
  void leave(uint64_t token);

 private:
  struct entry {
    grant g;
    bool any = false;  ///< trusted: an empty grant admits everything
  };
  status admit_locked(uint64_t token, const std::string& sender) const;
  /// The grant ops are checked against; null when everything is admitted.
  const grant* granted_locked(uint64_t token) const;
  static status check(const grant& g, uint64_t token, const std::string& sender, size_t k,
                      uint32_t region, uint64_t offset, uint64_t length);

  const bool trust_;
  std::mutex mu_;
  std::map<uint64_t, entry> open_;
  std::map<uint64_t, uint32_t> busy_;
};

/// Admission of one batch: leaves the fence when it goes out of scope.
class fence_pass {
 public:
  template <class Ops>
  fence_pass(fence_table& t, uint64_t token, const std::string& sender, const Ops& ops)
      : t_(t), token_(token), st_(t.enter(token, sender, ops)) {}
  fence_pass(const fence_pass&) = delete;
  fence_pass& operator=(const fence_pass&) = delete;
  ~fence_pass() {
    if (st_.ok())
      t_.leave(token_);
  }
  bool admitted() const { return st_.ok(); }
  const status& refusal() const { return st_; }

 private:
  fence_table& t_;
  uint64_t token_;
  status st_;
};

}  // namespace kvferry::transport
