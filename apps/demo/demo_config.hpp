// kvferry-demo's options (demo_config), and what the run derives from them:
// the workload, the epoch a harness writes, the ranks this process hosts.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include "actors/process/config.hpp"
#include "apps/common/scheduler_driver.hpp"

namespace kvferry::demo {

using namespace kvferry::apps;

struct demo_config : kvferry::config {
  std::string role = "all";
  std::string model = "llama-7b";
  std::string transport = "auto";
  std::string host = "127.0.0.1";
  uint16_t bootstrap_port = 0;
  uint32_t prefill_tp = 1;
  uint32_t prefill_pp = 1;
  uint32_t decode_tp = 1;
  uint32_t decode_pp = 1;
  uint32_t prefill_dp = 1;
  uint32_t decode_dp = 1;
  uint32_t page_size = 16;
  uint32_t pool_pages = 128;
  uint32_t aux_rows = 64;
  uint32_t rooms = 200;
  uint32_t min_tokens = 16;
  uint32_t max_tokens = 192;
  uint32_t chunk_pages = 4;
  uint32_t concurrency = 8;
  uint64_t seed = 42;
  bool json = false;
  std::string ranks;  // empty: every rank of the role
  bool join_bootstrap = false;
  bool follow_requests = false;
  uint32_t hold_mib = 0;
  int64_t epoch_ns = 0;
  bool epoch_from_stdin = false;
  uint32_t interval_us = 0;
  bool print_conclusions = false;
  bool no_staging = false;
  uint32_t staging_mib = 32;
  std::string checksum = "off";

  demo_config() {
    opt_group{custom_options_, "global"}
        .add(role, "role", "all (one process), prefill or decode")
        .add(model, "model", "KV shape: llama-7b (MHA), deepseek-mla (MLA), tiny or tiny-gqa")
        .add(transport, "transport",
             "data plane backend: auto (shm on one host, else tcp), tcp, shm or inproc (role=all "
             "only)")
        .add(host, "host", "loopback address for the bootstrap and the data plane")
        .add(bootstrap_port, "bootstrap-port", "bootstrap port (prefill: 0 = any free one)")
        .add(prefill_tp, "prefill-tp", "TP ranks of the prefill instance")
        .add(prefill_pp, "prefill-pp", "PP stages of the prefill instance")
        .add(decode_tp, "decode-tp", "TP ranks of the decode instance")
        .add(decode_pp, "decode-pp", "PP stages of the decode instance (1 or prefill's)")
        .add(prefill_dp, "prefill-dp",
             "DP attention groups of the prefill instance (each of prefill-tp / prefill-dp "
             "ranks; a room goes to group room % prefill-dp)")
        .add(decode_dp, "decode-dp",
             "DP attention groups of the decode instance (a room goes to group room % decode-dp)")
        .add(page_size, "page-size", "tokens per KV page")
        .add(pool_pages, "pool-pages", "pages per KV buffer in each rank's pool")
        .add(aux_rows, "aux-rows", "aux rows per rank")
        .add(rooms, "rooms", "requests to move")
        .add(min_tokens, "min-tokens", "shortest prompt")
        .add(max_tokens, "max-tokens", "longest prompt")
        .add(chunk_pages, "chunk-pages", "pages per prefill chunk (0 = whole prompt at once)")
        .add(concurrency, "concurrency", "requests in flight per side")
        .add(seed, "seed", "seed of page orders, prompt lengths and KV bytes")
        .add(json, "json", "print one JSON summary line per side")
        .add(no_staging, "no-staging",
             "heterogeneous TP (MHA/GQA): write head slices per token instead of staging")
        .add(staging_mib, "staging-mib",
             "MiB of each decode rank's staging ring and each prefill rank's gather buffer")
        .add(checksum, "checksum",
             "end-to-end KV checksums the decode ranks check on every chunk: off or xxh3")
        .add(ranks, "ranks", "rank indices (tp + pp * tp-size) this process hosts, e.g. 1 or 0,1")
        .add(hold_mib, "hold-mib",
             "hold this many MiB of touched memory besides the pools (a model's weights, say; "
             "4 KiB pages): how long this process's death takes to read")
        .add(follow_requests, "follow-requests",
             "prefill, replacing a process that died: open the rooms of its share only as "
             "decode ranks ask for them")
        .add(join_bootstrap, "join-bootstrap",
             "prefill: join the bootstrap at --bootstrap-port instead of hosting one")
        .add(epoch_ns, "epoch-ns", "paced requests: room i opens at epoch + i * interval")
        .add(epoch_from_stdin, "epoch-from-stdin",
             "paced requests: once the ranks are up, print \"ready\" and read the epoch "
             "(nanoseconds) from a line of stdin; a harness starts the clock when every "
             "process is ready, however long their memory took to touch")
        .add(interval_us, "interval-us", "paced requests: microseconds between rooms")
        .add(print_conclusions, "print-conclusions",
             "print when each rank concluded each room, and how");
  }
};

/// The epoch a harness wrote: a positive decimal number of nanoseconds.
bool parse_epoch(const std::string& line, int64_t& out);

/// The run's workload; `epoch_ns` is --epoch-ns, or what stdin said.
workload workload_of(const demo_config& cfg, int64_t epoch_ns);

/// The rank indices of --ranks, or every index below `count`; nullopt (with
/// the reason printed) for a list that names no rank of the instance.
std::optional<std::set<uint32_t>> ranks_to_host(const demo_config& cfg, uint32_t count);

/// Reads the epoch from stdin (--epoch-from-stdin) into `w`; false with the
/// reason printed.
bool await_epoch(const demo_config& cfg, workload& w);

}  // namespace kvferry::demo
