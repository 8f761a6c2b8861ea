#!/usr/bin/env python3
"""Peer transfer libraries on loopback: Mooncake Transfer Engine and NIXL.

    python peer_transfer.py --engine=mooncake|nixl [--sizes=4096,16384,...]
        [--size-bytes=N] [--kv-bytes=N] [--reps=N] [--quick] [--ucx-tls=TLS]
        [--window=N] [--transfer-bytes=N]

What it measures: WRITE bandwidth, the initiator (this process) pushing from
its registered memory into a target's registered memory, as a prefill pushes
KV pages into a decode. The target is a second process (this script again,
--role=target) that registers a zeroed receive region and hands its address
and the library's connection metadata back over its stdout; commands go to it
over its stdin. Both ends run on 127.0.0.1.

  - mooncake_tcp_ / nixl_ucx_bandwidth_by_size: per write size (4 KiB .. 16 MiB), one write
    per request, min(size-bytes, size * 20000) bytes per rep cycling through a
    256 MiB region at the same offsets on both sides. Writes go to the library
    as batches of about --transfer-bytes (one batch_transfer_async_write call,
    or one NIXL xfer of many descriptors), --window batches in flight. A
    batch's writes are spread over the rep (write i goes to batch i mod
    batches), so no two writes of one batch are adjacent and no library can
    merge them into larger ones.
  - mooncake_tcp_ / nixl_ucx_kv_bandwidth: a 7B model's pages, 128 KiB per page and buffer, a
    pool of 32 pages x 16 buffers on each side; batches of 16 random source
    pages into 16 random destination pages (random.Random(42)), i.e. 256
    writes of 128 KiB per batch, kv-bytes per rep, 2 batches in flight.

Each figure is the median GB/s (1e9 bytes/s) over reps, after one unmeasured
warm-up round of a quarter of the bytes (as kvferry-bench transports does).
Request plans (addresses, descriptor indices) are built before the clock
starts; the library calls that take them, and the waits, are timed.

Correctness is checked once per kind before measuring: the source is filled
with an offset-dependent pattern, the target's region starts zeroed, and the
target's CRC-32 of what it received must match the source's (the whole span
of the first size's warm-up, and every page of one KV batch). A transfer that
moves nothing fails the run.

Engines (the settings each figure used are in its notes):
  mooncake  mooncake-transfer-engine-non-cuda, protocol "tcp", metadata
            "P2PHANDSHAKE" (no etcd), local hostname 127.0.0.1; its lanes
            (connections per peer) at their default, its queue per peer
            raised so that deep windows are not refused.
  nixl      nixl (its nixl_cu13/nixl_cu12 wheel; runs without a GPU or
            torch), UCX backend with UCX_TLS=tcp (the peer of kvferry's tcp
            backend; --ucx-tls to change), UCX_NET_DEVICES=lo, UCX_MODULES=^ib,
            4 MiB socket buffers (as kvferry's tcp backend); NIXL's progress
            thread on the target only.

Output: one JSON object per line on stdout; library logs go to stderr. If the
engine does not import, one "skipped" line and exit 0; if a run fails midway
(peer died, transfer error, timeout), a "skipped" line naming the error and
exit 1. The handshake, each control request and each transfer have timeouts,
and a watchdog ends a run stuck inside a library call; the target is killed
at exit.
"""

import argparse
import base64
import collections
import ctypes
import importlib
import importlib.metadata
import json
import mmap
import os
import random
import select
import statistics
import subprocess
import sys
import threading
import time
import zlib

KiB, MiB = 1 << 10, 1 << 20
SIZES = [4 * KiB, 16 * KiB, 64 * KiB, 256 * KiB, 1 * MiB, 4 * MiB, 16 * MiB]
FLAT = 256 * MiB  # the per-size writes cycle through this part of the region
PAGE = 128 * KiB  # one page of one KV buffer
POOL_BUFFERS, POOL_PAGES, BATCH_PAGES = 16, 32, 16
POOL = POOL_BUFFERS * POOL_PAGES * PAGE  # the KV pool, after FLAT
REGION = FLAT + POOL  # registered once on each side
KV_WINDOW = 2
HANDSHAKE_S = 60  # the target's start and its reply to each command
TRANSFER_S = 60  # one batch of writes
MIN_RATE = 20e6  # bytes/s below which a round counts as stuck (watchdog)
INSTALL_HINT = "pip package {package}; `make peers` installs it in build/peers-venv"


def size_name(size):
    return f"{size // MiB} MiB" if size >= MiB else f"{size // KiB} KiB"


# -- memory ---------------------------------------------------------------------


class Region:
    """Anonymous, page-aligned memory the libraries register; faulted in up front."""

    def __init__(self, size):
        self.size = size
        self.buf = mmap.mmap(-1, size)
        self.addr = ctypes.addressof(ctypes.c_char.from_buffer(self.buf))
        zero = bytes(MiB)
        for off in range(0, size, MiB):
            self.buf[off:off + MiB] = zero

    def fill_pattern(self):
        """Random bytes, rotated differently in each MiB: every offset's bytes differ."""
        block = random.Random(7).randbytes(MiB)
        for j, off in enumerate(range(0, self.size, MiB)):
            r = (j * 4099) % MiB
            self.buf[off:off + MiB] = block[r:] + block[:r]

    def crc(self, off, length):
        return zlib.crc32(memoryview(self.buf)[off:off + length])


# -- control channel --------------------------------------------------------------


class Channel:
    """JSON lines: read from one fd (with timeouts), written to one file."""

    def __init__(self, read_fd, write_file):
        self.fd = read_fd
        self.out = write_file
        self.pending = b""

    def send(self, obj):
        self.out.write(json.dumps(obj) + "\n")
        self.out.flush()

    def recv(self, timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.pending:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise TimeoutError(f"no reply from the target within {timeout} s")
            if not select.select([self.fd], [], [], left)[0]:
                continue
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                raise EOFError("the control channel closed")
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return json.loads(line)

    def request(self, obj):
        self.send(obj)
        reply = self.recv(HANDSHAKE_S)
        if "error" in reply:
            raise RuntimeError(f"target: {reply['error']}")
        return reply


def private_stdout():
    """A file on the real stdout for our JSON; fd 1 (library prints) goes to stderr."""
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    return out


# -- engines -------------------------------------------------------------------------
# Each engine: __init__(region, serving) registers the region (serving: this
# end is the target, which only receives); endpoint() is what the initiator
# needs (target side); connect(endpoint) (initiator side);
# plan(base, granule, pairs) turns (source slot, destination slot) pairs of
# `granule`-byte slots from `base` into one request; post(request) starts it
# and returns a handle; wait(handle) returns when it is done or raises.


class Mooncake:
    prefix = "mooncake_tcp"
    package = "mooncake-transfer-engine-non-cuda"
    module = "mooncake.engine"
    request_api = ("batch_transfer_async_write call, each waited for with "
                   "get_batch_transfer_status (which spins)")

    @staticmethod
    def configure(args):
        # Set before either process creates its engine; an explicit setting wins.
        # Its tcp transport queues at most 1024 writes per peer by default and
        # fails a batch beyond that (4 KiB writes, 4 requests in flight); the
        # ceiling only refuses, it does not pace. Its lanes (connections per
        # peer, MC_TCP_LANES_PER_PEER, default 4) are left alone: on 2 cores
        # 2, 4 and 8 measured alike and 1 lower.
        os.environ.setdefault("MC_TCP_MAX_QUEUED_TRANSFERS_PER_PEER", "65535")
        os.environ.setdefault("MC_TRANSFER_TIMEOUT", str(TRANSFER_S))
        os.environ.setdefault("MC_LOG_LEVEL", "WARNING")  # its per-batch INFO lines cost time

    @staticmethod
    def settings():
        return {k: v for k, v in os.environ.items() if k.startswith("MC_") and k != "MC_LOG_LEVEL"}

    @staticmethod
    def version():
        return f"{Mooncake.package} {importlib.metadata.version(Mooncake.package)}"

    def __init__(self, region, serving):
        from mooncake.engine import TransferEngine

        self.region = region
        self.te = TransferEngine()
        if self.te.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") != 0:
            raise RuntimeError("TransferEngine.initialize(127.0.0.1, P2PHANDSHAKE, tcp) failed")
        if self.te.register_memory(region.addr, region.size) != 0:
            raise RuntimeError("TransferEngine.register_memory failed")

    def endpoint(self):
        return {"session": f"127.0.0.1:{self.te.get_rpc_port()}", "base": self.region.addr}

    def connect(self, endpoint):
        self.session = endpoint["session"]
        self.remote_base = endpoint["base"]

    def plan(self, base, granule, pairs):
        src = [self.region.addr + base + s * granule for s, _ in pairs]
        dst = [self.remote_base + base + d * granule for _, d in pairs]
        return src, dst, [granule] * len(pairs)

    def post(self, request):
        batch = self.te.batch_transfer_async_write(self.session, *request)
        if batch <= 0:
            raise RuntimeError("batch_transfer_async_write refused the batch")
        return batch

    def wait(self, batch):
        # Spins (GIL released) until done, failed or MC_TRANSFER_TIMEOUT.
        if self.te.get_batch_transfer_status([batch]) != 0:
            raise RuntimeError("a Mooncake batch failed or timed out")


class Nixl:
    prefix = "nixl_ucx"
    package = "nixl"
    module = "nixl"
    request_api = ("NIXL xfer (make_prepped_xfer over descriptor lists prepped once, "
                   "transfer, check_xfer_state polled; no progress thread on the "
                   "initiator, NIXL's on the target)")

    @staticmethod
    def configure(args):
        os.environ["UCX_TLS"] = args.ucx_tls
        os.environ.setdefault("UCX_NET_DEVICES", "lo")
        os.environ.setdefault("UCX_WARN_UNUSED_ENV_VARS", "n")
        # The wheel's IB modules load libnl, whose destructor crashes the process
        # at exit (SIGSEGV in rtnl_tc_unregister) on a host without RDMA; tcp
        # and shared-memory transports need none of them.
        os.environ.setdefault("UCX_MODULES", "^ib")
        # 4 MiB socket buffers, as kvferry's tcp backend sets its own
        # (tcp_options::socket_buffer): with UCX's default, NIXL moved a flat
        # 0.52 GB/s from 16 KiB writes up; with these, 0.7-0.9.
        os.environ.setdefault("UCX_TCP_SNDBUF", "4M")
        os.environ.setdefault("UCX_TCP_RCVBUF", "4M")

    @staticmethod
    def settings():
        return {k: os.environ[k] for k in ("UCX_TLS", "UCX_NET_DEVICES", "UCX_MODULES",
                                           "UCX_TCP_SNDBUF", "UCX_TCP_RCVBUF")}

    @staticmethod
    def version():
        import nixl

        name = f"nixl {importlib.metadata.version('nixl')}"
        backend = getattr(nixl, "_pkg", None)  # the wheel nixl's meta package picked
        if backend is None:
            return name
        return f"{name} ({backend.__name__} {importlib.metadata.version(backend.__name__)})"

    def __init__(self, region, serving):
        from nixl._api import nixl_agent, nixl_agent_config

        self.region = region
        # The target's UCX worker needs NIXL's progress thread to take in tcp
        # data; the initiator progresses its own by polling its transfers,
        # which on 2 cores beats a progress thread competing for them.
        config = nixl_agent_config(enable_prog_thread=serving, backends=["UCX"])
        self.agent = nixl_agent(f"peer-{os.getpid()}", config)
        if "UCX" not in self.agent.backends:
            raise RuntimeError("NIXL has no UCX backend plugin")
        self.agent.register_memory([(region.addr, region.size, 0, "")], "DRAM")
        self.layouts = {}

    def endpoint(self):
        return {"metadata": base64.b64encode(self.agent.get_agent_metadata()).decode(),
                "base": self.region.addr}

    def connect(self, endpoint):
        self.remote = self.agent.add_remote_agent(base64.b64decode(endpoint["metadata"]))
        self.remote_base = endpoint["base"]

    def _layout(self, base, granule):
        """Prepped descriptor lists of the `granule`-byte slots from `base`, both sides."""
        if (base, granule) not in self.layouts:
            for handles in self.layouts.values():
                for h in handles:
                    h.release()
            self.layouts.clear()
            span = FLAT if base == 0 else POOL
            slots = range(0, span // granule * granule, granule)
            local = [(self.region.addr + base + o, granule, 0) for o in slots]
            remote = [(self.remote_base + base + o, granule, 0) for o in slots]
            self.layouts[(base, granule)] = (
                self.agent.prep_xfer_dlist("NIXL_INIT_AGENT", local, "DRAM"),
                self.agent.prep_xfer_dlist(self.remote, remote, "DRAM"))
        return self.layouts[(base, granule)]

    def plan(self, base, granule, pairs):
        local, remote = self._layout(base, granule)
        return local, [s for s, _ in pairs], remote, [d for _, d in pairs]

    def post(self, request):
        local, src, remote, dst = request
        xfer = self.agent.make_prepped_xfer("WRITE", local, src, remote, dst)
        if self.agent.transfer(xfer) == "ERR":
            raise RuntimeError("NIXL refused to post a transfer")
        return xfer

    def wait(self, xfer):
        deadline = time.monotonic() + TRANSFER_S
        while (state := self.agent.check_xfer_state(xfer)) == "PROC":
            if time.monotonic() > deadline:
                raise TimeoutError(f"a NIXL transfer took more than {TRANSFER_S} s")
        if state != "DONE":
            raise RuntimeError("a NIXL transfer failed")
        xfer.release()


ENGINES = {"mooncake": Mooncake, "nixl": Nixl}


# -- the target ------------------------------------------------------------------------


def serve_target(engine_cls):
    """Registers a zeroed region, reports its endpoint, answers CRC requests until EOF."""
    chan = Channel(0, private_stdout())
    try:
        region = Region(REGION)
        engine = engine_cls(region, serving=True)
        chan.send({"ready": engine.endpoint()})
    except Exception as e:  # reported to the initiator, which fails the run
        chan.send({"error": f"{type(e).__name__}: {e}"})
        return 1
    while True:
        try:
            msg = chan.recv()
        except EOFError:  # the initiator is done (or died)
            return 0
        chan.send({"crcs": [region.crc(off, n) for off, n in msg["ranges"]]})


# -- the initiator ------------------------------------------------------------------------


class Watchdog(threading.Thread):
    """Ends the run (skipped line, exit 1) when a phase outlives its deadline."""

    def __init__(self, on_expiry):
        super().__init__(daemon=True)
        self.on_expiry = on_expiry
        self.cv = threading.Condition()
        self.deadline = None
        self.what = ""

    def arm(self, seconds, what):
        with self.cv:
            self.deadline = time.monotonic() + seconds
            self.what = f"{what} took more than {seconds:.0f} s"
            self.cv.notify()

    def run(self):
        with self.cv:
            while self.deadline is None or time.monotonic() < self.deadline:
                self.cv.wait(None if self.deadline is None else self.deadline - time.monotonic())
            self.on_expiry(self.what)


def run_transfers(engine, requests, window):
    """Posts every request, at most `window` in flight; returns when all are done."""
    in_flight = collections.deque()
    for request in requests:
        if len(in_flight) == window:
            engine.wait(in_flight.popleft())
        in_flight.append(engine.post(request))
    while in_flight:
        engine.wait(in_flight.popleft())


def size_plan(engine, size, nbytes, transfer_bytes):
    """Requests for nbytes in `size` writes (same offsets both sides), about
    transfer_bytes per request, write i in request i mod requests. Returns
    (requests, bytes, writes per request)."""
    writes = max(1, nbytes // size)
    per = max(1, min(writes, transfer_bytes // size))
    count = -(-writes // per)
    slots = FLAT // size
    requests = [engine.plan(0, size, [(i % slots, i % slots) for i in range(r, writes, count)])
                for r in range(count)]
    return requests, writes * size, per


def kv_pairs(rng):
    """One KV batch: BATCH_PAGES random pages into BATCH_PAGES random pages, every buffer."""
    src = rng.sample(range(POOL_PAGES), BATCH_PAGES)
    dst = rng.sample(range(POOL_PAGES), BATCH_PAGES)
    return [(b * POOL_PAGES + s, b * POOL_PAGES + d)
            for b in range(POOL_BUFFERS) for s, d in zip(src, dst)]


def kv_plan(engine, nbytes, rng):
    per_batch = BATCH_PAGES * POOL_BUFFERS * PAGE
    batches = max(1, nbytes // per_batch)
    return [engine.plan(FLAT, PAGE, kv_pairs(rng)) for _ in range(batches)], batches * per_batch


def timed_round(engine, watchdog, requests, nbytes, window, what):
    watchdog.arm(TRANSFER_S + nbytes / MIN_RATE, what)
    t0 = time.perf_counter()
    run_transfers(engine, requests, window)
    return nbytes / (time.perf_counter() - t0) / 1e9


def verify(chan, region, ranges, what):
    """ranges: (offset, length) written at the same offset on both sides, or
    (source offset, destination offset, length)."""
    ranges = [(r[0], r[0], r[1]) if len(r) == 2 else r for r in ranges]
    want = [region.crc(s, n) for s, _, n in ranges]
    got = chan.request({"ranges": [[d, n] for _, d, n in ranges]})["crcs"]
    bad = sum(w != g for w, g in zip(want, got))
    if bad:
        raise RuntimeError(f"verification failed after {what}: {bad} of {len(ranges)} "
                           "ranges at the target differ from the source")


class Initiator:
    def __init__(self, engine_cls, args, out):
        self.cls = engine_cls
        self.args = args
        self.out = out
        self.target = None
        self.watchdog = Watchdog(self.expire)

    def emit(self, obj):
        self.out.write(json.dumps(obj) + "\n")
        self.out.flush()

    def skipped(self, why):
        self.emit({"suite": "transports", "metric": f"{self.cls.prefix}_bandwidth_by_size",
                   "value": 0, "unit": "GB/s", "reps": 0, "extra": {}, "notes": {"skipped": why}})

    def expire(self, what):
        self.skipped(f"timed out: {what}")
        self.stop_target()
        os._exit(1)

    def target_exit(self):
        """The target's exit status, once it has had a moment to end; None if it runs."""
        try:
            return self.target.wait(timeout=2) if self.target else None
        except subprocess.TimeoutExpired:
            return None

    def stop_target(self):
        if self.target and self.target.poll() is None:
            self.target.kill()
            self.target.wait()

    def start_target(self):
        argv = [sys.executable, os.path.abspath(__file__), "--role=target",
                f"--engine={self.args.engine}"]
        self.target = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       text=True, bufsize=1)
        chan = Channel(self.target.stdout.fileno(), self.target.stdin)
        try:
            reply = chan.recv(HANDSHAKE_S)
        except EOFError:
            raise RuntimeError(f"the target exited ({self.target.wait()}) before its handshake")
        if "error" in reply:
            raise RuntimeError(f"target: {reply['error']}")
        return chan, reply["ready"]

    def figure(self, metric, values, extra, notes):
        return {"suite": "transports", "metric": f"{self.cls.prefix}_{metric}",
                "value": round(statistics.median(values), 4), "unit": "GB/s",
                "reps": len(values),
                "extra": {**extra, "min": round(min(values), 4), "max": round(max(values), 4)},
                "notes": {**notes, "engine": self.version, "settings": self.settings}}

    def run(self):
        self.watchdog.start()
        self.watchdog.arm(HANDSHAKE_S, "the handshake")
        region = Region(REGION)
        region.fill_pattern()
        engine = self.cls(region, serving=False)
        self.version, self.settings = self.cls.version(), json.dumps(self.cls.settings())
        chan, endpoint = self.start_target()
        engine.connect(endpoint)
        self.sizes(engine, chan, region)
        self.kv(engine, chan, region)

    def sizes(self, engine, chan, region):
        a = self.args
        how = (f"WRITE into the target's registered memory; one write per request, "
               f"about {size_name(a.transfer_bytes)} of requests per {self.cls.request_api}, "
               f"{a.window} in flight; same offsets both sides, cycling a 256 MiB region")
        for n, size in enumerate(a.sizes):
            nbytes = min(a.size_bytes, size * 20000)
            warm, wbytes, _ = size_plan(engine, size, nbytes // 4, a.transfer_bytes)
            timed_round(engine, self.watchdog, warm, wbytes, a.window, f"{size_name(size)} warm-up")
            if n == 0:  # the warm-up wrote [0, wbytes), wrapping at FLAT
                verify(chan, region, [(0, min(wbytes, FLAT // size * size))],
                       f"the {size_name(size)} warm-up")
            values = []
            for r in range(a.reps):
                reqs, done, per = size_plan(engine, size, nbytes, a.transfer_bytes)
                values.append(timed_round(engine, self.watchdog, reqs, done, a.window,
                                          f"{size_name(size)} rep {r + 1}"))
            self.emit(self.figure("bandwidth_by_size", values,
                                  {"size_bytes": size, "bytes_per_rep": done,
                                   "writes_per_request": per, "requests_in_flight": a.window},
                                  {"size": size_name(size), "how": how}))

    def kv(self, engine, chan, region):
        a = self.args
        rng = random.Random(42)
        pairs = kv_pairs(rng)
        timed_round(engine, self.watchdog, [engine.plan(FLAT, PAGE, pairs)], len(pairs) * PAGE,
                    1, "the KV check batch")
        verify(chan, region, [(FLAT + s * PAGE, FLAT + d * PAGE, PAGE) for s, d in pairs],
               "one KV batch")
        warm, wbytes = kv_plan(engine, a.kv_bytes // 4, rng)
        timed_round(engine, self.watchdog, warm, wbytes, KV_WINDOW, "the KV warm-up")
        values = []
        for r in range(a.reps):
            reqs, done = kv_plan(engine, a.kv_bytes, rng)
            values.append(timed_round(engine, self.watchdog, reqs, done, KV_WINDOW, f"KV rep {r + 1}"))
        self.emit(self.figure(
            "kv_bandwidth", values,
            {"bytes_per_rep": done, "writes_per_batch": BATCH_PAGES * POOL_BUFFERS,
             "batches_in_flight": KV_WINDOW},
            {"shape": f"7B, 128 KiB per page and buffer, {POOL_PAGES} pages x {POOL_BUFFERS} "
                      f"buffers per side, {BATCH_PAGES} random pages per batch into random "
                      f"pages (random.Random(42)), {KV_WINDOW} batches in flight",
             "how": "WRITE into the target's registered memory; one batch (256 writes of "
                    f"128 KiB) per {self.cls.request_api}"}))


# -- main ---------------------------------------------------------------------------------


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--engine", choices=sorted(ENGINES), required=True)
    p.add_argument("--role", choices=["initiator", "target"], default="initiator",
                   help="target: the receiving process this script starts itself")
    p.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=SIZES,
                   help="write sizes in bytes, comma-separated (default 4 KiB .. 16 MiB)")
    p.add_argument("--size-bytes", type=int, help="bytes per rep and size (default 256 MiB, "
                   "--quick 64 MiB; at most size * 20000)")
    p.add_argument("--kv-bytes", type=int, help="bytes per KV rep (default 1 GiB, --quick 256 MiB)")
    p.add_argument("--reps", type=int, help="default 5, --quick 3")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--ucx-tls", default="tcp",
                   help="nixl: UCX_TLS (default tcp; shared memory: sm,tcp, tcp for its wireup)")
    p.add_argument("--window", type=int, default=2, help="per-size requests in flight")
    p.add_argument("--transfer-bytes", type=int, default=4 * MiB,
                   help="per size: bytes of writes per request (at least one write)")
    a = p.parse_args()
    a.size_bytes = a.size_bytes or (64 if a.quick else 256) * MiB
    a.kv_bytes = a.kv_bytes or (256 if a.quick else 1024) * MiB
    a.reps = a.reps or (3 if a.quick else 5)
    return a


def main():
    args = parse_args()
    cls = ENGINES[args.engine]
    if args.role == "target":
        return serve_target(cls)
    out = private_stdout()
    cls.configure(args)
    init = Initiator(cls, args, out)
    try:
        importlib.import_module(cls.module)
    except Exception as e:
        init.skipped(f"cannot import {cls.module} ({type(e).__name__}: {e}); "
                     + INSTALL_HINT.format(package=cls.package))
        return 0
    try:
        init.run()
    except Exception as e:
        died = init.target_exit()
        init.skipped(f"failed: {type(e).__name__}: {e}"
                     + ("" if died is None else f" (the target exited with status {died})"))
        return 1
    finally:
        init.stop_target()
    return 0


if __name__ == "__main__":
    sys.exit(main())
