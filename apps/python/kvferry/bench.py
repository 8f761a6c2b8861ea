"""kvferry from Python, measured: one JSON line per figure, each beside the C++
figure of the same run (the convention of kvferry-bench).

    python -m kvferry.bench [--quick] [--json] [--cpp-bench build/apps/kvferry-bench]
                            [--mooncake]

  python_poll_ns          one KVReceiver.poll() from Python; baseline the same
                          room's poll() from C++ (a loop inside the module)
  python_room_latency_us  one small room end to end, prefill and decode each a
                          Python process of kvferry.rank_driver (SGLang's call
                          order), tcp on loopback; baseline kvferry-bench tcp's
                          room_latency_us (the C++ facade, same room shape)
  python_bandwidth        the 7B shape (64 buffers of 128 KiB pages), rooms of
                          8 pages, TP 1 -> 1, tcp; baseline kvferry-bench tcp's
                          tcp_bandwidth (the C++ path, same shape)
  with --mooncake (SGLang and mooncake-transfer-engine-non-cuda importable):
  sglang_mooncake_bandwidth, sglang_mooncake_room_latency_us: the same driver
                          over SGLang's MooncakeKV* classes and Mooncake's tcp
                          transport, TP 2 -> 2, host buffers, loopback; kvferry's
                          figures of the same layout beside them, with the ratio
  kill_to_failed_ms       kill -9 of one prefill rank, TP 2 -> 2: time until every
                          decode rank's poll says Failed, for each backend
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

TINY = ["--layers", "4", "--total-heads", "8", "--head-dim", "64", "--page", "16"]
SEVEN_B = ["--layers", "32", "--total-heads", "32", "--head-dim", "128", "--page", "16"]


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def percentile(xs, q):
    xs = sorted(xs)
    if not xs:
        return None
    k = (len(xs) - 1) * q / 100
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def emit(fig, as_json):
    if as_json:
        print(json.dumps(fig), flush=True)
        return
    base = ""
    if fig.get("baseline") is not None:
        base = f"  (baseline {fig['baseline_name']}: {fig['baseline']:.6g}, ratio {fig['ratio']:.3g})"
    print(f"python.{fig['metric']} = {fig['value']:.6g} {fig['unit']}{base}  {fig.get('notes', '')}",
          flush=True)


def figure(metric, value, unit, baseline=None, baseline_name="", **notes):
    f = {"suite": "python", "metric": metric, "value": value, "unit": unit}
    if baseline is not None:
        f.update(baseline=baseline, baseline_name=baseline_name,
                 ratio=(value / baseline) if baseline else None)
    if notes:
        f["notes"] = notes
    return f


class Run:
    """The processes of one driver case (bootstrap, prefill ranks, decode ranks)."""

    def __init__(self, backend, prefill_tp, decode_tp, common, tmp, env=None):
        self.tmp, self.procs = tmp, {}
        self.env = dict(os.environ, **(env or {}))
        boot, dport, pg, dg = free_ports(4)
        self.boot = boot
        base = ["--backend", backend, *map(str, common)]
        self.bootstrap = self._start("boot", ["--role", "bootstrap", "--bootstrap-port", boot,
                                              *base], stdin=True)
        line = self.bootstrap.stdout.readline().strip()
        if line != "ready":
            raise RuntimeError(f"{backend} bootstrap did not start: {self.log('boot')}")
        self.prefill = [self._start(f"prefill{r}", [
            "--role", "prefill", "--tp-rank", r, "--tp-size", prefill_tp, "--peer-tp-size",
            decode_tp, "--bootstrap-port", boot, "--group-port", pg, "--out",
            f"{tmp}/prefill{r}.json", *base]) for r in range(prefill_tp)]
        self.decode = [self._start(f"decode{r}", [
            "--role", "decode", "--tp-rank", r, "--tp-size", decode_tp, "--peer-tp-size",
            prefill_tp, "--bootstrap-port", dport, "--group-port", dg, "--prefill-ports", boot,
            "--out", f"{tmp}/decode{r}.json", *(["--progress", f"{tmp}/progress"] if r == 0 else []),
            *base]) for r in range(decode_tp)]

    def _start(self, name, args, stdin=False):
        err = open(f"{self.tmp}/{name}.err", "w")
        p = subprocess.Popen([sys.executable, "-m", "kvferry.rank_driver", *map(str, args)],
                             env=self.env, stderr=err, text=True,
                             stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                             stdout=subprocess.PIPE if stdin else subprocess.DEVNULL)
        self.procs[name] = p
        return p

    def log(self, name):
        with open(f"{self.tmp}/{name}.err") as f:
            return f.read()[-2000:]

    def wait_decode(self, limit=600):
        end = time.monotonic() + limit
        for i, p in enumerate(self.decode):
            rc = p.wait(timeout=max(1, end - time.monotonic()))
            if rc != 0:
                raise RuntimeError(f"decode{i} exited with {rc}: {self.log(f'decode{i}')}")
        return [json.load(open(f"{self.tmp}/decode{i}.json")) for i in range(len(self.decode))]

    def progress(self):
        try:
            with open(f"{self.tmp}/progress") as f:
                return int(f.read() or 0)
        except (OSError, ValueError):
            return 0

    def close(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
            p.wait()


def driver_case(backend, prefill_tp, decode_tp, common, env=None):
    tmp = tempfile.mkdtemp(prefix="kvferry-bench-py-")
    run = Run(backend, prefill_tp, decode_tp, common, tmp, env)
    try:
        results = run.wait_decode()
    finally:
        run.close()
    shutil.rmtree(tmp, ignore_errors=True)
    d0 = results[0]
    rooms = d0["rooms"].values()
    failed = [v for v in rooms if not v["ok"]]
    if failed:
        raise RuntimeError(f"{backend}: {len(failed)} rooms failed: {failed[0].get('why')}")
    lat = [v["latency_s"] * 1e6 for v in rooms]
    kv_bytes = sum(v["kv_bytes"] for d in results for v in d["rooms"].values())
    first = min(d["first_open"] for d in results)
    last = max(v["done_at"] for d in results for v in d["rooms"].values())
    seconds = last - first
    return dict(latency_us=lat, gbps=kv_bytes / seconds / 1e9, rooms=len(lat))


def kill_case(backend, common, env=None):
    """kill -9 of prefill rank 1 (TP 2 -> 2) once decode concluded 10 rooms: (first, last)
    milliseconds from the kill until a decode rank's own poll said Failed, over the rooms
    that failed after it."""
    tmp = tempfile.mkdtemp(prefix="kvferry-bench-kill-")
    env = dict(env or {}, KVFERRY_TEST_HANG_S="2")
    run = Run(backend, 2, 2, common, tmp, env)
    try:
        end = time.monotonic() + 300
        while run.progress() < 10:
            if time.monotonic() > end or run.decode[0].poll() is not None:
                raise RuntimeError(f"{backend}: decode made no progress: {run.log('decode0')}")
            time.sleep(0.005)
        killed = time.time()
        run.prefill[1].send_signal(signal.SIGKILL)
        results = run.wait_decode()
    finally:
        run.close()
    shutil.rmtree(tmp, ignore_errors=True)
    failed = [v for d in results for v in d["rooms"].values()
              if not v["ok"] and v.get("failed_at", 0) >= killed]
    in_flight = [v["failed_at"] for v in failed if v["opened_at"] < killed]
    later = [(v["failed_at"] - v["opened_at"]) * 1e3 for v in failed if v["opened_at"] >= killed]
    return dict(last_in_flight_ms=(max(in_flight) - killed) * 1e3 if in_flight else None,
                first_ms=(min(in_flight) - killed) * 1e3 if in_flight else None,
                rooms_in_flight=len(in_flight) // 2,
                opened_after_p50_ms=percentile(later, 50), rooms_opened_after=len(later) // 2)


def cpp_figures(cpp_bench, quick):
    """kvferry-bench tcp's room latency and bandwidth, this run."""
    if not cpp_bench or not os.access(cpp_bench, os.X_OK):
        return {}
    args = [cpp_bench, "tcp", "--json", "--no-tls"] + (["--quick"] if quick else [])
    out = subprocess.run(args, capture_output=True, text=True, timeout=1200).stdout
    figs = {}
    for line in out.splitlines():
        if line.startswith("{"):
            f = json.loads(line)
            figs[f["metric"]] = f["value"]
    return figs


def poll_figure(quick):
    """A room held in WaitingForInput; poll() timed from Python and from C++."""
    from kvferry.rank_driver import Pool, ServerArgs, load_backend
    from kvferry.sglang import KVBootstrapServer, KVManager, KVPoll, KVReceiver, KVSender
    load_backend("kvferry")
    boot, dport = free_ports(2)
    KVBootstrapServer("127.0.0.1", boot)
    pools = [Pool(8, 2, 2, 0, False) for _ in range(2)]
    pre = KVManager(pools[0].kv_args(0), "prefill", ServerArgs(1, boot))
    dec = KVManager(pools[1].kv_args(0), "decode", ServerArgs(1, dport))
    s = KVSender(pre, f"127.0.0.1:{boot}", 77)
    r = KVReceiver(dec, f"127.0.0.1:{boot}", 77)
    r.init(0)
    end = time.monotonic() + 30
    while r.poll() != KVPoll.WaitingForInput and time.monotonic() < end:
        time.sleep(0.001)
    n = 200_000 if quick else 2_000_000
    best_py = best_cpp = float("inf")
    for _ in range(5):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            r.poll()
        best_py = min(best_py, (time.perf_counter_ns() - t0) / n)
        best_cpp = min(best_cpp, r._native.poll_ns(n))
    r.abort()
    s.clear()
    r.clear()
    pre.teardown()
    dec.teardown()
    return figure("python_poll_ns", best_py, "ns", best_cpp,
                  "the same poll() from C++, same process",
                  calls=n, note="best of 5; KVReceiver.poll() through kvferry.sglang")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--cpp-bench", default=os.environ.get("KVFERRY_BENCH", "build/apps/kvferry-bench"))
    ap.add_argument("--mooncake", action="store_true")
    opts = ap.parse_args()
    q = opts.quick
    emit(poll_figure(q), opts.json)

    cpp = cpp_figures(opts.cpp_bench, q)
    rooms = 100 if q else 400
    lat = driver_case("kvferry", 1, 1, [
        *TINY, "--requests", rooms, "--min-pages", 1, "--max-pages", 1, "--window", 1,
        "--idle-us", 20, "--transport", "tcp", "--no-verify"])
    emit(figure("python_room_latency_us", percentile(lat["latency_us"], 50), "us",
                cpp.get("room_latency_us"), "kvferry-bench tcp room_latency_us p50 (C++ facade)",
                p99=percentile(lat["latency_us"], 99), rooms=lat["rooms"],
                room="1 page of 16 tokens, 4 layers x 8 heads x 64 (128 KiB) + aux row",
                layout="TP 1 -> 1, one Python process per rank, tcp on loopback"), opts.json)

    bw_common = [*SEVEN_B, "--requests", 16 if q else 48, "--min-pages", 8, "--max-pages", 8,
                 "--pool-pages", 32, "--window", 4, "--idle-us", 50, "--transport", "tcp",
                 "--no-verify"]
    bw = driver_case("kvferry", 1, 1, bw_common)
    emit(figure("python_bandwidth", bw["gbps"], "GB/s", cpp.get("tcp_bandwidth"),
                "kvferry-bench tcp tcp_bandwidth (C++, same shape)", rooms=bw["rooms"],
                shape="llama-7b: 64 buffers x 128 KiB pages, 8 pages (64 MiB) per room",
                layout="TP 1 -> 1, tcp on loopback; bytes over first room opened to last room done"),
         opts.json)

    if not opts.mooncake:
        return
    tp_lat = [*TINY, "--requests", rooms, "--min-pages", 1, "--max-pages", 1, "--window", 1,
              "--idle-us", 20, "--transport", "tcp", "--no-verify"]
    tp_bw = [*SEVEN_B, "--requests", 16 if q else 48, "--min-pages", 8, "--max-pages", 8,
             "--pool-pages", 32, "--window", 4, "--idle-us", 50, "--transport", "tcp",
             "--no-verify"]
    figs = {}
    for backend in ("kvferry", "mooncake"):
        figs[backend] = (driver_case(backend, 2, 2, tp_lat), driver_case(backend, 2, 2, tp_bw))
    k_lat, m_lat = (percentile(figs[b][0]["latency_us"], 50) for b in ("kvferry", "mooncake"))
    k_bw, m_bw = (figs[b][1]["gbps"] for b in ("kvferry", "mooncake"))
    layout = "TP 2 -> 2, one Python process per rank, host buffers, tcp on loopback"
    emit(figure("sglang_mooncake_room_latency_us", m_lat, "us", layout=layout,
                kvferry_us=k_lat, kvferry_ratio=k_lat / m_lat), opts.json)
    emit(figure("sglang_mooncake_bandwidth", m_bw, "GB/s", layout=layout,
                kvferry_gbps=k_bw, kvferry_ratio=k_bw / m_bw), opts.json)
    kill_common = [*TINY, "--requests", 60, "--min-pages", 1, "--max-pages", 4,
                   "--idle-us", 100, "--transport", "tcp", "--no-verify"]
    # SGLang's Mooncake backend fails a room whose prefill rank died only at its
    # waiting/bootstrap timeouts (300 s by default): shortened to 20 s here.
    mooncake_env = {"SGLANG_DISAGGREGATION_WAITING_TIMEOUT": "20",
                    "SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT": "20"}
    for backend in ("kvferry", "mooncake"):
        k = kill_case(backend, kill_common, mooncake_env if backend == "mooncake" else None)
        last = k.pop("last_in_flight_ms")
        emit(figure(f"{backend}_kill_to_failed_ms", last if last is not None else -1, "ms",
                    **k, layout=layout, event="kill -9 of prefill rank 1 after 10 rooms",
                    measured="from the kill until the last room in flight then said Failed on "
                    "every decode rank's own poll; opened_after: a room opened to the dead "
                    "instance, from open to Failed",
                    timeouts="SGLang's waiting and bootstrap timeouts 20 s" if backend == "mooncake"
                    else "kvferry's defaults (heartbeat silence 1 s)"), opts.json)


if __name__ == "__main__":
    main()
