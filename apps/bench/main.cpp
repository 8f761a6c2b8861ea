// kvferry-bench SUITE [--json] [--quick] [--reps=N]
//
// Measures kvferry against the machine's own limits in the same run and
// prints one line per figure (one JSON object per line with --json). Suites:
//   tcp         tcp_bandwidth (vs a raw TCP stream), room_latency_us (vs CAF's RTT)
//   transports  shm_kv_bandwidth (vs memcpy), tcp_kv_bandwidth (vs a raw TCP stream),
//               both per write size 4 KiB..16 MiB, beside ucx_perftest when installed
//   failover    kill_to_all_failed_p50_ms/_p99_ms, partition_to_all_failed_p99_ms
//   cuda        gather/scatter kernel GB/s (vs cudaMemcpy D2D), bounce pipeline GB/s
//   rooms       one-page rooms across two processes, N in flight: rooms/s, p50/p99,
//               CPU us per room on each side (vs CAF's RTT)
// The bench starts its peers itself (--peer=NAME re-executes this binary).
#include <cstdlib>
#include <iostream>
#include <stdexcept>

#include "actors/base/log.hpp"
#include "apps/bench/bench_args.hpp"
#include "apps/bench/suite_checksum.hpp"
#include "apps/bench/suite_cuda.hpp"
#include "apps/bench/suite_failover.hpp"
#include "apps/bench/suite_rooms.hpp"
#include "apps/bench/suite_staging.hpp"
#include "apps/bench/suite_tcp.hpp"
#include "apps/bench/suite_transports.hpp"

namespace {

int usage() {
  std::cerr << "usage: kvferry-bench SUITE [--json] [--quick] [--reps=N]\n"
               "suites:\n"
               "  tcp   tcp_bandwidth: KV-shaped batches through the tcp backend, baseline a raw\n"
               "        TCP stream between the same two processes; room_latency_us: p50/p99 of\n"
               "        one small room across two processes, baseline CAF's request round trip,\n"
               "        then the same over mutual TLS; room_latency_metrics_us: with Prometheus'\n"
               "        figures kept and scraped, against metrics off, in alternating runs\n"
               "        (--metrics-pairs=N, default 8); --no-bandwidth, --no-rooms, --no-tls\n"
               "        skip parts\n"
               "  transports  shm_kv_bandwidth (baseline memcpy of the same ops) and\n"
               "        tcp_kv_bandwidth (baseline a raw TCP stream) for KV-shaped batches, then\n"
               "        per write size 4 KiB..16 MiB, beside ucx_perftest put bandwidth when\n"
               "        installed, and Mooncake's transfer engine (tcp) and NIXL (UCX over\n"
               "        tcp) on the same sizes and KV batch from the venv `make peers` makes\n"
               "        (--peers-python=PATH or $KVFERRY_PEERS_PYTHON for another);\n"
               "        --table=PATH writes the per-size table for the plot, --backends=shm,tcp\n"
               "        picks backends, --no-ucx skips UCX, --no-peers the peers\n"
               "  failover  kill_to_all_failed_p50_ms/_p99_ms (kill -9 of one prefill rank\n"
               "        process, TP 2 -> 2, to the last survivor's conclusion; --kills=N) and\n"
               "        partition_to_all_failed_p99_ms (SIGSTOP instead; --stops=N)\n"
               "  staging  writes_per_request_ratio (head-sliced writes per request over\n"
               "        staging's) and staging_bandwidth (baseline the sliced path, same rooms)\n"
               "        for MHA TP 4 -> 1 and 1 -> 4; --model=NAME, --rooms=N,\n"
               "        --min-tokens/--max-tokens, --chunk-pages=N, --transport=auto|tcp|shm\n"
               "  checksum  checksum_bandwidth: KV moved with end-to-end XXH3 checksums\n"
               "        checked on decode, baseline without, same rooms, per transport\n"
               "        (--transports=shm,tcp) and TP 1 -> 1, 2 -> 2, 1 -> 2; --model=NAME,\n"
               "        --rooms=N, --min-tokens/--max-tokens, --chunk-pages=N, --reps=N\n"
               "  cuda  staging's gather/scatter kernel (baseline cudaMemcpy device to device)\n"
               "        and the pinned bounce pipeline (baseline cudaMemcpy D2H/H2D); skips\n"
               "        without a GPU; --tokens=N, --iters=N, --bounce-bytes=B\n"
               "  rooms  rooms_per_s, room_latency_p50_us and cpu_us_per_room (each side's\n"
               "        getrusage) for one-page rooms across two processes, pipelined with N\n"
               "        in flight, baseline CAF's request round trip; --tp=1,4,\n"
               "        --inflight=1,8,64,512, --rooms=N per configuration, --warmup=N,\n"
               "        --transport=tcp|shm|auto, --page-tokens=N (1), --policy=sharing|\n"
               "        stealing and --threads=N (CAF's scheduler, both sides); then\n"
               "        messages_per_room, state_bytes_per_inflight_room and\n"
               "        rss_growth_bytes_per_room over --rss-rooms=N (100000; 0: none);\n"
               "        --table=PATH for apps/bench/plot_rooms.gp\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    auto a = kvferry::bench::parse_args(argc, argv);
    kvferry::set_log_level("error");
    if (a.has("peer")) {
      auto peer = a.get("peer", std::string{});
      if (peer == "tcp-sink")
        return kvferry::bench::run_tcp_sink_peer(a);
      if (peer == "prefill-rooms")
        return kvferry::bench::run_prefill_rooms_peer(a);
      if (peer == "transport-sink")
        return kvferry::bench::run_transport_sink_peer(a);
      if (peer == "rooms-prefill")
        return kvferry::bench::run_rooms_prefill_peer(a);
      std::cerr << "kvferry-bench: --peer=" << peer
                << ", expected tcp-sink, prefill-rooms, transport-sink or rooms-prefill\n";
      return 2;
    }
    if (a.suite == "tcp")
      return kvferry::bench::run_tcp_suite(a);
    if (a.suite == "transports")
      return kvferry::bench::run_transports_suite(a);
    if (a.suite == "failover")
      return kvferry::bench::run_failover_suite(a);
    if (a.suite == "staging")
      return kvferry::bench::run_staging_suite(a);
    if (a.suite == "checksum")
      return kvferry::bench::run_checksum_suite(a);
    if (a.suite == "cuda")
      return kvferry::bench::run_cuda_suite(a);
    if (a.suite == "rooms")
      return kvferry::bench::run_rooms_suite(a);
    if (!a.suite.empty())
      std::cerr << "kvferry-bench: unknown suite '" << a.suite << "'\n";
    return usage();
  } catch (const std::exception& e) {
    std::cerr << "kvferry-bench: " << e.what() << "\n";
    return 1;
  }
}
