// The ranks of one instance that this process hosts, as the binaries start
// them (kvferry-demo, kvferry-launch): a host pool per rank with its heads and
// layers, and a runtime per rank; the view the synthetic scheduler drives.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/expected.hpp>

#include "actors/facade/runtime.hpp"
#include "apps/common/host_pool.hpp"
#include "apps/common/scheduler_driver.hpp"

namespace kvferry::apps {

struct ranks_spec {
  role side = role::prefill;
  std::string instance;
  uint32_t tp = 1;
  uint32_t pp = 1;
  std::set<uint32_t> hosted;  ///< rank indices (tp + pp * tp size); empty: all
  model_shape shape;
  uint32_t page_size = 16;
  uint32_t pool_pages = 128;
  uint32_t aux_rows = 64;
  std::string transport = "auto";
  std::string listen_host = "127.0.0.1";
  uint16_t first_data_port = 0;  ///< 0: any free port; else rank i listens on this + i
  deadlines limits;
  staging_options staging;                  ///< heterogeneous TP (MHA/GQA): ring and gather buffers
  kv_checksum checksum = kv_checksum::off;  ///< decode: end-to-end KV checksums checked
  bootstrap_locator bootstrap;              ///< prefill
  /// Prefill: publish each rank's actor on listen_host (a free port), so that
  /// decode processes connect to its process directly.
  bool publish_control = true;
  decider_locator decider;  ///< decode
  /// Where the ranks keep their figures for Prometheus (null: none).
  std::shared_ptr<metrics::registry> metrics;
};

struct hosted_ranks {
  std::vector<std::unique_ptr<host_pool>> pools;
  std::vector<std::unique_ptr<runtime>> ranks;

  instance_ranks view() const;
  void stop();
};

/// Starts the ranks of `spec`. The error's message names the rank that did
/// not start: "tp1 pp0: <why>".
caf::expected<hosted_ranks> start_ranks(caf::actor_system& sys, const ranks_spec& spec);

}  // namespace kvferry::apps
