// The cluster file (TOML, toml++): its caps and its reader. Every error reads
// "FILE:LINE: reason", naming the value and what was expected. See
// deploy/clusters/*.toml for examples of every key; cluster_spec.hpp for what
// a file describes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "apps/common/cluster_spec.hpp"

namespace kvferry::launch {

// -- caps on a cluster file ------------------------------------------------------
// A cluster file is read by every node's launcher, and the parser loops over
// what it lists (ranks per port, instances per decode instance): the caps keep
// a mistyped or hostile file from costing more than a moment. TP and PP sizes
// use the caps of messages/layout.hpp (max_tp_size, max_pp_size,
// max_instance_ranks), so a file never names an instance that no rank could
// register.

/// Largest cluster file: the biggest example in deploy/clusters is ~2 KiB.
constexpr size_t max_cluster_file_bytes = size_t{1} << 20;

/// Most [[node]] and [[instance]] tables of one file.
constexpr size_t max_nodes = 1024;
constexpr size_t max_instances = 1024;

/// Most ranks of a cluster (the sum of TP x PP over its instances).
constexpr uint64_t max_cluster_ranks = 65536;

/// Most prefill instances one decode instance lists.
constexpr size_t max_prefills_per_decode = max_instances;

/// A parsed file, or every error found in it ("FILE:LINE: reason").
struct cluster_parse {
  std::optional<cluster_spec> cluster;
  std::vector<std::string> errors;
};

/// Parses `text`; `file` names it in messages. Refuses a text above
/// max_cluster_file_bytes and lists beyond the caps above, naming the value.
cluster_parse parse_cluster(std::string_view text, const std::string& file);

/// Reads and parses the file at `path` (never more than max_cluster_file_bytes
/// + 1 bytes of it).
cluster_parse load_cluster(const std::string& path);

}  // namespace kvferry::launch
