// The cluster file kvferry-launch reads: which nodes (hosts) there are, which
// instances (prefill, decode) each runs with their TP and PP sizes and ports,
// the data plane, the deadlines, the heartbeat and an optional synthetic
// workload. A plain struct and its parser (toml++); every error reads
// "FILE:LINE: reason", naming the value and what was expected. See
// deploy/clusters/*.toml for examples of every key.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "actors/rank/deadlines.hpp"

namespace kvferry::launch {

/// A machine of the cluster: one kvferry-launch process runs there.
struct node_spec {
  std::string name;
  std::string host;  ///< address the bootstrap and the data plane listen on
  uint32_t line = 0;
};

enum class instance_role { prefill, decode };

/// One serving instance; all its ranks run in the process of its node.
struct instance_spec {
  std::string name;
  instance_role role = instance_role::prefill;
  std::string node;
  uint32_t tp = 1;
  uint32_t pp = 1;
  /// Prefill: the port its bootstrap is published on (required, nonzero, so
  /// that decode nodes know where to find it).
  uint16_t bootstrap_port = 0;
  /// First data plane port; rank i listens on data_port + i (0: any free one).
  uint16_t data_port = 0;
  /// Decode: the prefill instance it receives from (may be left out when the
  /// file has one prefill instance).
  std::string prefill;
  uint32_t line = 0;  ///< of the [[instance]] header
  uint32_t bootstrap_port_line = 0;
  uint32_t data_port_line = 0;
};

/// Synthetic requests, driven on every instance as the demo does.
struct workload_spec {
  uint32_t requests = 100;
  uint32_t min_tokens = 16;
  uint32_t max_tokens = 192;
  uint32_t page_size = 16;
  uint32_t pool_pages = 128;
  uint32_t aux_rows = 64;
  uint32_t chunk_pages = 4;
  uint32_t concurrency = 8;
  uint64_t seed = 42;
  std::string model = "llama-7b";  ///< llama-7b, deepseek-mla, tiny, tiny-gqa
  uint32_t line = 0;
};

struct cluster_spec {
  std::string file;               ///< as given, for messages
  std::string transport = "tcp";  ///< data plane backend (one that crosses processes)
  deadlines limits;               ///< [deadlines] and [heartbeat]
  std::vector<node_spec> nodes;
  std::vector<instance_spec> instances;
  std::optional<workload_spec> workload;

  const node_spec* find_node(std::string_view name) const;
  const instance_spec* find_instance(std::string_view name) const;
  /// The prefill instance decode instance `d` receives from.
  const instance_spec* prefill_of(const instance_spec& d) const;
};

/// A parsed file, or every error found in it ("FILE:LINE: reason").
struct cluster_parse {
  std::optional<cluster_spec> cluster;
  std::vector<std::string> errors;
};

/// Parses `text`; `file` names it in messages.
cluster_parse parse_cluster(std::string_view text, const std::string& file);

/// Reads and parses the file at `path`.
cluster_parse load_cluster(const std::string& path);

/// "prefill" or "decode".
const char* to_string(instance_role r);

/// Parses a duration such as "200ms", "20s", "5m", "500us" (nullopt if not one).
std::optional<std::chrono::nanoseconds> parse_duration(std::string_view text);

}  // namespace kvferry::launch
