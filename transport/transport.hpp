// The data plane's one interface. A rank registers its KV memory, connects to
// the peers it writes to, and posts batches of one-sided writes; completions
// come back through a handler, one per posted batch.
//
// Callers branch on capabilities(), never on a backend's name. Backends live
// in one folder each (inproc/, tcp/, shm/, verbs/, auto/), build on base/, and
// are created through registry.hpp from options.hpp.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "transport/device_memory.hpp"
#include "transport/grant.hpp"
#include "transport/options.hpp"
#include "transport/region.hpp"
#include "transport/status.hpp"
#include "transport/write_op.hpp"

namespace kvferry::transport {

/// What a backend can do.
struct caps {
  /// Batches posted to one peer are placed in the order they were posted, and
  /// the ops of one batch in their order: a write appended after others lands
  /// after them.
  bool ordered_writes = false;
  /// Can register device (GPU) memory directly.
  bool device_memory = false;
  /// Largest length of one write_op.
  uint64_t max_write_bytes = UINT64_MAX;
};

/// Called once per posted batch, from a thread of the transport (or, for
/// backends that complete synchronously, from the thread that posted).
using completion_handler = std::function<void(completion)>;

/// One backend instance, owned by one rank. Thread-safe.
class transport {
 public:
  virtual ~transport() = default;

  /// The backend's name, for logs ("tcp", "inproc").
  virtual std::string_view name() const = 0;

  virtual caps capabilities() const = 0;

  /// Where peers connect to reach this transport's registered regions,
  /// e.g. "tcp://127.0.0.1:40123" or "inproc://decode-0".
  virtual std::string endpoint() const = 0;

  /// Registers [base, base + length) of `kind` memory for local reads and
  /// remote writes. The memory must stay valid until deregister_region()
  /// returns. Device memory needs caps::device_memory or options::device
  /// (invalid_argument naming the backend otherwise).
  virtual result<region_id> register_region(void* base, uint64_t length, memory_kind kind) = 0;

  /// Registers host memory.
  result<region_id> register_region(void* base, uint64_t length) {
    return register_region(base, length, memory_kind::host);
  }

  /// Unregisters a region. Returns once no write into it is running; later
  /// writes to it fail with unknown_region.
  virtual status deregister_region(region_id id) = 0;

  /// Starts connecting to a peer's endpoint and returns its id at once (the
  /// connection is made in the background; a failure completes the batches
  /// posted to it with connect_failed). Fails only for a malformed endpoint.
  /// `credential` is what the receiving side's credential_for() gave for
  /// this transport's endpoint (handed over on the control plane); a
  /// receiver that requires one refuses the connection without it.
  virtual result<peer_id> connect(const std::string& endpoint, const std::string& credential) = 0;

  /// Connects without a credential (to a receiver that trusts every peer).
  result<peer_id> connect(const std::string& endpoint) { return connect(endpoint, {}); }

  /// Posts a batch. On OK the handler is called exactly once for it later (or
  /// inline); on error it is not called and nothing was written.
  virtual status post(peer_id peer, write_batch batch) = 0;

  /// Sets where completions go. Call before the first post.
  virtual void set_completion_handler(completion_handler handler) = 0;

  // -- receiving side --------------------------------------------------------

  /// The credential a sender whose endpoint is `sender` needs to connect to
  /// this transport (empty where none is needed: inproc).
  virtual std::string credential_for(const std::string& sender) const = 0;

  /// Opens fence `token`: batches posted with it by the grant's senders, into
  /// the grant's items, are accepted from now on (transport/grant.hpp).
  virtual void open_fence(uint64_t token, grant g) = 0;

  /// Opens fence `token` with no grant (admits anything only where the
  /// transport trusts every peer: options::trust_every_peer).
  void open_fence(uint64_t token) { open_fence(token, grant{}); }

  /// Closes fence `token`: no batch with it starts writing after this call
  /// (it fails with code::fenced). Returns true once no batch with it is
  /// still writing either, so nothing with it can land any more; false
  /// while one that started before is in progress (call again, or
  /// disconnect its sender). Never blocks.
  virtual bool close_fence(uint64_t token) = 0;

  /// Closes the connections from the peer whose endpoint is `endpoint`; a
  /// batch it is in the middle of stops where it is. It may connect again.
  virtual void disconnect(const std::string& endpoint) = 0;
};

}  // namespace kvferry::transport
