// The scheduler-facing entry point of one rank. A scheduler process starts one
// runtime per rank inside its own actor system; the runtime registers the KV
// pool with the chosen transport and spawns the rank's actors. Rooms are then
// opened as sender (prefill) or receiver (decode) objects whose poll() never
// leaves the scheduler's thread.
//
//   auto rt = runtime::start(sys, opts);            // once per rank
//   auto s = (*rt)->make_sender(room);               // prefill, per request
//   s.init(num_pages, aux_slot); s.send(pages, true);
//   while (!is_terminal(s.poll())) { ... }           // atomic load
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/expected.hpp>

#include "actors/common/deadlines.hpp"
#include "actors/facade/kv_pool.hpp"
#include "actors/facade/receiver.hpp"
#include "actors/facade/sender.hpp"
#include "actors/metrics/registry.hpp"
#include "actors/plan/kv_digest.hpp"
#include "actors/staging/staging_options.hpp"
#include "messages/bootstrap.hpp"
#include "messages/decision.hpp"
#include "messages/handles.hpp"
#include "messages/ids.hpp"
#include "messages/layout.hpp"
#include "transport/shared_memory.hpp"
#include "transport/transport.hpp"

namespace kvferry {

struct local_pool;

struct transfer_counters;

struct rank_options {
  role side = role::prefill;
  std::string instance;  ///< instance name ("prefill-0"); decode ranks name their own
  uint32_t tp_rank = 0;
  uint32_t tp_size = 1;
  uint32_t pp_rank = 0;
  uint32_t pp_size = 1;
  kv_pool pool;
  /// Backend name, see transport/registry.hpp: "auto" picks shm for a peer on
  /// this host and network namespace, tcp for any other.
  std::string transport = "auto";
  transport::options transport_options;  ///< listen address of the data plane, ...
  /// Where a pool buffer is device memory and transport_options.device is
  /// unset: the device copier to make (transport/device_registry.hpp: "cuda",
  /// or "host" to run the device paths on host memory) and its GPU.
  std::string device_copier = "cuda";
  int cuda_device = 0;
  deadlines limits;
  staging_options staging;
  /// Decode: end-to-end KV checksums. Every chunk's source sends the digests
  /// of what it wrote (kv_digest.hpp); this rank checks what landed before
  /// the chunk counts, and a mismatch fails the room (checksum_mismatch) on
  /// every rank of both instances. Host pools only, for now.
  kv_checksum checksum = kv_checksum::off;
  /// Prefill: the bootstrap this rank registers with.
  bootstrap_locator bootstrap;
  /// Prefill: publish the rank's actor on control_host:control_port (0: any
  /// free port) so that decode processes and deciders connect to this
  /// process directly; a rank in a process of its own needs it (one rank
  /// per process, as GPU servers run). Empty host: not published (peers reach
  /// it through its bootstrap's process, or it shares theirs).
  std::string control_host;
  uint16_t control_port = 0;
  /// Decode: the decider of this rank's instance. Left empty on a decode
  /// instance of one rank, the runtime spawns a private one.
  decider_locator decider;
  /// Wraps the transport before the rank uses it (fault injection in tests,
  /// instrumentation); identity when empty.
  std::function<std::unique_ptr<transport::transport>(std::unique_ptr<transport::transport>)>
      wrap_transport;
  /// Where the rank keeps its figures for Prometheus (rooms, failures,
  /// bytes per peer, staging, its decider's heartbeats when it has its own):
  /// usually one registry per process, rendered by /metrics. Null: none kept.
  std::shared_ptr<metrics::registry> metrics;
  /// Tell the bootstrap or decider this process's life token (taken on the
  /// first rank's start, actors/process/life_token.hpp): one on the same host
  /// hears of the process's death within a millisecond of a kill, before its
  /// connections drop. Off: the down_msg alone, after the kernel tore the
  /// process down.
  bool life_token = true;
  /// Stop waits until the rank's actors (and so its transport threads) are
  /// gone, so the pool's memory may be freed right after. Tests on CAF's
  /// deterministic scheduler set it to false.
  bool wait_on_stop = true;
};

class runtime {
 public:
  /// Registers the pool and spawns the rank. Errors name the bad value (an
  /// inconsistent pool, an unknown transport, a port in use...).
  static caf::expected<std::unique_ptr<runtime>> start(caf::actor_system& sys, rank_options opts);

  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;

  /// Stops the rank (see stop()).
  ~runtime();

  /// Prefill: opens room `room` on this rank.
  sender make_sender(uint64_t room);

  /// Decode: opens room `room`, whose KV comes from the prefill instance at `where`.
  receiver make_receiver(uint64_t room, bootstrap_locator where);

  const rank_ref& rank() const { return rank_; }
  const kv_layout& layout() const { return layout_; }
  /// Where peers' transports reach this rank's pool.
  const std::string& data_endpoint() const { return endpoint_; }
  /// Prefill: the port its actor is published on (0: not published).
  uint16_t control_port() const { return control_port_; }

  /// Decode: why the prefill instance at `where` is down (new rooms to it
  /// fail at once), nullopt while it is not known down. A router reads it to
  /// send rooms elsewhere. No round trip: what the rank actor published.
  std::optional<failure> prefill_down(const bootstrap_locator& where) const;
  /// Prefill: why this rank's own instance is dead (a rank left and did not
  /// come back), nullopt while it is whole.
  std::optional<failure> instance_down() const;
  /// Prefill: rooms decode ranks asked this rank for that its scheduler has
  /// not opened (a router sent them here).
  std::vector<uint64_t> requested_rooms() const;

  /// The rank actor, for schedulers that are actors themselves.
  prefill_rank_actor prefill() const { return prefill_; }
  decode_rank_actor decode() const { return decode_; }
  /// Prefill: the rank's transfer actor (tests step through it).
  transfer_actor transfer() const { return transfer_; }
  /// Decode: the decider this rank reports to, when it is a handle.
  decider_actor decider() const { return opts_.decider.handle; }
  /// Prefill: what its transfer actor did so far (null on a decode rank).
  const transfer_counters* counters() const { return counters_.get(); }
  /// Decode: the rank's staging actor (null with staging off).
  staging_actor staging() const { return staging_; }

  /// Terminates the rank's actors; with wait_on_stop, returns once they are
  /// gone and the transport has stopped touching the pool.
  void stop();

 private:
  runtime(caf::actor_system& sys, rank_options opts);

  /// The staging ring (decode) or gather buffer (prefill), registered with
  /// the data plane; none (a null base) when staging is off or the model is
  /// MLA.
  struct staging_area {
    std::byte* base = nullptr;
    uint64_t bytes = 0;
    uint32_t region = 0;
  };
  caf::expected<staging_area> open_staging(transport::transport& net, const local_pool& pool);
  /// Spawns the side's actors: prefill, the transfer actor and the rank
  /// (published at control_host when set); decode, the staging actor, the
  /// rank, and a decider of its own for a one-rank instance that names none.
  caf::error start_prefill(std::shared_ptr<transport::transport> net, const local_pool& pool,
                           const staging_area& staging, const std::shared_ptr<int>& alive);
  caf::error start_decode(std::shared_ptr<transport::transport> net, const local_pool& pool,
                          const staging_area& staging, const std::shared_ptr<int>& alive);

  caf::actor_system& sys_;
  rank_options opts_;
  rank_ref rank_;
  kv_layout layout_;
  std::string endpoint_;
  prefill_rank_actor prefill_;
  decode_rank_actor decode_;
  transfer_actor transfer_;
  staging_actor staging_;
  std::shared_ptr<transfer_counters> counters_;
  transport::shared_memory staging_memory_;  // the ring or the gather buffer
  std::shared_ptr<void> staging_pin_;        // pinned for the device copier; goes first
  decider_actor own_decider_;                // spawned for a one-rank decode instance
  std::weak_ptr<const void> alive_;          // held by the rank actor while it lives
  uint16_t control_port_ = 0;                // where the prefill rank is published
  std::shared_ptr<rank_board> board_ = std::make_shared<rank_board>();
  bool stopped_ = false;
};

/// Builds a rank's layout from its pool, with the region ids the transport
/// gave each buffer (KV buffers, aux buffers, then every state component's
/// buffers, in order) and the rank's place in its instance. Checks the result
/// (validate()); the error names the field.
caf::expected<kv_layout> layout_of(const kv_pool& pool, const std::vector<uint32_t>& regions,
                                   uint32_t tp_rank = 0, uint32_t tp_size = 1, uint32_t pp_rank = 0,
                                   uint32_t pp_size = 1);

}  // namespace kvferry
