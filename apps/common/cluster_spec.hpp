// A cluster as kvferry-launch and kvferry-ctl see it: which nodes (hosts)
// there are, which instances (prefill, decode) each runs with their TP and PP
// sizes and ports, the data plane, the deadlines, the heartbeat and an
// optional synthetic workload; and the queries both tools ask of it (which
// instance a room goes to, how a node runs its ranks). Plain structs: the
// cluster file's reader (cluster_file.hpp) fills them.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "actors/common/deadlines.hpp"
#include "actors/common/durations.hpp"
#include "actors/plan/kv_digest.hpp"
#include "actors/process/tls_files.hpp"
#include "actors/staging/staging_options.hpp"

namespace kvferry::launch {

/// How a node runs its ranks: all in the node's process, or one child
/// process per rank (as a GPU server runs them), children of the node's
/// kvferry-launch and killed with it.
enum class process_mode { per_node, per_rank };

/// What the launcher does when a process it started dies abnormally (killed
/// by a signal, or a non-zero exit before its workload finished): nothing
/// (never), or start it again with the same command line (on-failure) after
/// a delay that doubles with each consecutive restart, at most `limit` times
/// per process. Keys restart, restart_backoff, restart_backoff_max and
/// restart_limit, at the top of the file and in each [[node]].
enum class restart_mode { never, on_failure };

struct restart_policy {
  restart_mode mode = restart_mode::never;
  std::chrono::nanoseconds backoff{std::chrono::milliseconds{200}};  ///< before the first restart
  std::chrono::nanoseconds backoff_max{std::chrono::seconds{5}};     ///< the doubling stops here
  uint32_t limit = 10;  ///< restarts per rank (per-rank children) or node (--local)

  bool on() const { return mode == restart_mode::on_failure; }
  /// The delay before the `n`-th consecutive restart (1-based): backoff,
  /// doubled n - 1 times, at most backoff_max.
  std::chrono::nanoseconds delay(uint32_t n) const;

  friend bool operator==(const restart_policy&, const restart_policy&) = default;
};

/// A machine of the cluster: one kvferry-launch process runs there.
struct node_spec {
  std::string name;
  std::string host;  ///< address the bootstrap and the data plane listen on
  /// Where its status actor is published (kvferry-ctl reads it); 0: any free
  /// port (kvferry-ctl cannot find it then).
  uint16_t status_port = 0;
  /// Where its Prometheus endpoint (HTTP GET /metrics) listens; 0: none.
  uint16_t metrics_port = 0;
  std::optional<process_mode> processes;  ///< overrides the file's
  /// The file's restart policy with this node's own keys over it: for the
  /// node's per-rank children, and for the node's process under --local.
  restart_policy restart;
  uint32_t line = 0;
  uint32_t status_port_line = 0;
  uint32_t metrics_port_line = 0;
};

enum class instance_role { prefill, decode };

/// One serving instance; all its ranks run in the process of its node.
struct instance_spec {
  std::string name;
  instance_role role = instance_role::prefill;
  std::string node;
  uint32_t tp = 1;
  uint32_t pp = 1;
  /// DP attention groups (dp = N in the file): the reader splits such an
  /// instance into N instances "<name>/dp<g>" of tp / N ranks each, group g
  /// on bootstrap_port + g and data ports from data_port + g x its ranks;
  /// a decode instance naming it receives from every group. 1 once split.
  uint32_t dp = 1;
  /// Prefill: the port its bootstrap is published on (required, nonzero, so
  /// that decode nodes know where to find it).
  uint16_t bootstrap_port = 0;
  /// First data plane port; rank i listens on data_port + i (0: any free one).
  uint16_t data_port = 0;
  /// Decode: the prefill instances it receives from, a string or a list (may
  /// be left out when the file has one prefill instance). With several, the
  /// workload's rooms of this instance go to each in turn.
  std::vector<std::string> prefills;
  /// Decode: end-to-end KV checksums its ranks check ("xxh3"; default off).
  kv_checksum checksum = kv_checksum::off;
  uint32_t line = 0;  ///< of the [[instance]] header
  uint32_t dp_line = 0;
  bool dp_group = false;  ///< one DP group of an instance split by the reader
  uint32_t bootstrap_port_line = 0;
  uint32_t data_port_line = 0;
};

/// Synthetic requests, driven on every instance as the demo does. Rooms
/// 1..requests are routed as a router would: room r goes to decode instance
/// (r - 1) mod D (in file order), and from there to the prefill instances it
/// names in turn.
struct workload_spec {
  uint32_t requests = 100;
  double requests_per_second = 0;  ///< paced arrivals over the cluster; 0: as fast as possible
  std::chrono::nanoseconds progress{std::chrono::seconds{5}};  ///< period of progress lines
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

/// [tls]: the control plane over mutual TLS (docs/SECURITY.md). `dir` is
/// relative to the cluster file's folder; "{node}" in a file name stands for
/// the node's name. deploy/make-certs.sh writes exactly these names.
struct tls_spec {
  std::string dir;  ///< resolved against the cluster file's folder
  std::string ca = "ca.pem";
  std::string certificate = "{node}.pem";
  std::string key = "{node}.key";
  uint32_t line = 0;

  /// The files of identity `node` (a node's name, or "ctl" for kvferry-ctl).
  tls_files files_of(const std::string& node) const;
};

struct cluster_spec {
  std::string file;  ///< as given, for messages
  /// Data plane backend (one that crosses processes): auto picks shm for a
  /// peer on this host and network namespace, tcp otherwise.
  std::string transport = "auto";
  process_mode processes = process_mode::per_node;
  restart_policy restart;   ///< the top-level keys (each node has its own, see node_spec)
  deadlines limits;         ///< [deadlines] and [heartbeat]
  staging_options staging;  ///< [staging]: enabled, ring_mib, gather_mib
  std::vector<node_spec> nodes;
  std::vector<instance_spec> instances;
  std::optional<workload_spec> workload;
  std::optional<tls_spec> tls;  ///< absent: plain BASP (loopback only, quietly)
  /// `insecure = true`: a node may listen off loopback without [tls] (it
  /// refuses to start otherwise).
  bool insecure = false;

  const node_spec* find_node(std::string_view name) const;
  const instance_spec* find_instance(std::string_view name) const;
  /// The first prefill instance decode instance `d` receives from.
  const instance_spec* prefill_of(const instance_spec& d) const;
  /// How node `n` runs its ranks.
  process_mode processes_of(const node_spec& n) const;

  /// Workload routing: the decode instance of room `room` (1-based).
  const instance_spec* decode_of(uint64_t room) const;
  /// Workload routing: the prefill instance of room `room`.
  const instance_spec* source_of(uint64_t room) const;
  /// The rooms of the workload that instance `i` takes part in, ascending.
  std::vector<uint64_t> rooms_of(const instance_spec& i) const;
};

/// "prefill" or "decode".
const char* to_string(instance_role r);

/// "per-node" or "per-rank".
const char* to_string(process_mode m);
std::optional<process_mode> parse_process_mode(std::string_view text);

/// "never" or "on-failure".
const char* to_string(restart_mode m);
std::optional<restart_mode> parse_restart_mode(std::string_view text);

/// "never" or "on-failure, 200ms doubling up to 5s, at most 10 restarts".
std::string to_string(const restart_policy& p);

/// Parses a duration such as "200ms", "20s", "5min", "500us" (nullopt if not one).
std::optional<std::chrono::nanoseconds> parse_duration(std::string_view text);

// format_duration (actors/common/durations.hpp) writes a duration as the
// file does; parse_duration reads it back.

}  // namespace kvferry::launch
