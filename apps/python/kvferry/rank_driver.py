"""One rank process of a prefill or decode server, driven as SGLang's scheduler
drives a transfer backend, over numpy buffers (host memory). The backend is
kvferry.sglang (--backend kvferry) or any module with the same five names
(--backend mooncake: SGLang's own Mooncake backend, kvferry/mooncake_backend.py).

Every rank of a TP group runs the same loop and acts only on polls combined with
MIN across the group (poll_and_all_reduce, here over a socket), so that every
rank takes the same decisions in the same order, as SGLang's ranks do.

    python -m kvferry.rank_driver --role prefill|decode|bootstrap ... --out result.json

The workload (rooms, their lengths and their prefill instance) follows from
--seed; page contents follow from (room, page, layer, K/V, head, token, dim), so
decode checks every byte it received without talking to prefill (--no-verify
skips both, for bandwidth figures). Decode records each room's latency, from
opening the receiver to the group's Success, and the bytes it received.
"""

import argparse
import importlib
import json
import os
import socket
import struct
import sys
import time

import numpy as np

LAYERS, HEAD_DIM, PAGE = 2, 16, 4  # the test shape; --layers, --head-dim, --page change it
AUX_ROWS, STATE_SLOTS, STATE_ITEM = 64, 64, 64
WINDOW = 16  # rooms in flight per rank
HUNG = []  # the rooms of a prefill rank whose TP group broke: held, never cleared
CHUNK = 3  # pages per send (chunked prefill)
B = None  # the backend module: KVArgs, KVPoll, KVManager, KVSender, KVReceiver, KVBootstrapServer


def load_backend(name):
    global B
    B = importlib.import_module({"kvferry": "kvferry.sglang",
                                 "mooncake": "kvferry.mooncake_backend"}.get(name, name))
    return B


class ServerArgs:
    """The fields of SGLang's ServerArgs the backend reads."""

    def __init__(self, tp_size, bootstrap_port):
        self.host = "127.0.0.1"
        self.port = 30000
        self.tp_size = tp_size
        self.pp_size = 1
        self.dp_size = 1
        self.nnodes = 1
        self.dist_init_addr = None
        self.disaggregation_bootstrap_port = bootstrap_port


class Group:
    """MIN all-reduce of uint8 vectors across a TP group (rank 0 gathers and answers)."""

    def __init__(self, rank, size, port):
        self.rank, self.size, self.peers = rank, size, []
        if size == 1:
            return
        if rank == 0:
            srv = socket.create_server(("127.0.0.1", port))
            srv.settimeout(120)
            while len(self.peers) < size - 1:
                self.peers.append(srv.accept()[0])
            srv.close()
        else:
            deadline = time.time() + 120
            while True:
                try:
                    self.peers.append(socket.create_connection(("127.0.0.1", port)))
                    break
                except OSError:
                    if time.time() > deadline:
                        raise
                    time.sleep(0.05)
        for p in self.peers:
            p.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    @staticmethod
    def _recv(sock, n):
        buf = b""
        while len(buf) < n:
            got = sock.recv(n - len(buf))
            if not got:
                raise ConnectionError("a rank of the TP group is gone")
            buf += got
        return buf

    def _recv_vec(self, sock):
        (n,) = struct.unpack("!I", self._recv(sock, 4))
        return np.frombuffer(self._recv(sock, n), dtype=np.uint8) if n else np.zeros(0, np.uint8)

    @staticmethod
    def _send_vec(sock, v):
        sock.sendall(struct.pack("!I", len(v)) + v.tobytes())

    def min(self, values):
        v = np.asarray(values, dtype=np.uint8)
        if self.size == 1:
            return v
        if self.rank == 0:
            for p in self.peers:
                other = self._recv_vec(p)
                if len(other) != len(v):
                    raise RuntimeError(f"ranks disagree on the poll vector: {len(other)} vs {len(v)}")
                v = np.minimum(v, other)
            for p in self.peers:
                self._send_vec(p, v)
            return v
        self._send_vec(self.peers[0], v)
        return self._recv_vec(self.peers[0])


def workload(seed, count, instances, min_pages=1, max_pages=12):
    rng = np.random.default_rng(seed)
    base = int(rng.integers(1, 2**40))
    return [dict(room=base + i, pages=int(rng.integers(min_pages, max_pages + 1)),
                 prefill=i % instances) for i in range(count)]


class Pages:
    """Page allocation in room order. Without --pool-pages, no page is reused (every
    byte stays checkable); with it, pages wrap around (bandwidth runs, unverified)."""

    def __init__(self, total):
        self.total, self.next = total, 0

    def take(self, n):
        if self.next + n > self.total:
            self.next = 0
        first, self.next = self.next, self.next + n
        return first


def page_values(room, page, layer, kv, heads, total_heads):
    """The bf16 words of one page of one layer's K or V, for global heads `heads`."""
    t = np.arange(PAGE, dtype=np.uint64)[:, None, None]
    h = np.asarray(heads, dtype=np.uint64)[None, :, None]
    d = np.arange(HEAD_DIM, dtype=np.uint64)[None, None, :]
    v = (np.uint64(room % 1000003) * np.uint64(7919) + np.uint64(page * 131 + layer * 104729
         + kv * 15485863) + t * np.uint64(31) + h * np.uint64(17) + d)
    return (v % np.uint64(65521)).astype(np.uint16)


def state_values(room, tp_rank):
    return ((np.arange(STATE_ITEM, dtype=np.uint64) + np.uint64(room) * np.uint64(13)
             + np.uint64(tp_rank * 101)) % np.uint64(251)).astype(np.uint8)


class Pool:
    """One rank's buffers: K and V per layer, SGLang-like aux rows, a Mamba-like state."""

    def __init__(self, pages, heads, total_heads, tp_rank, with_state):
        self.heads = list(range(tp_rank * heads, (tp_rank + 1) * heads))
        self.total_heads = total_heads
        self.kv = [np.zeros((pages, PAGE, heads, HEAD_DIM), np.uint16) for _ in range(2 * LAYERS)]
        self.output_ids = np.zeros((AUX_ROWS, 16), np.int32)
        self.bootstrap_room = np.zeros((AUX_ROWS, 8), np.uint64)
        self.state = np.zeros((STATE_SLOTS, STATE_ITEM), np.uint8) if with_state else None

    def kv_args(self, tp_rank):
        a = B.KVArgs()
        a.engine_rank = tp_rank
        a.pp_rank = 0
        a.gpu_id = 0
        a.ib_device = None
        a.kv_data_ptrs = [b.ctypes.data for b in self.kv]
        a.kv_data_lens = [b.nbytes for b in self.kv]
        a.kv_item_lens = [b[0].nbytes for b in self.kv]
        a.kv_layer_ids = list(range(LAYERS)) * 2
        a.kv_cache_dtype_str = "bf16"
        a.kv_head_num = len(self.heads)
        a.total_kv_head_num = self.total_heads
        a.page_size = PAGE
        a.prefill_start_layer = 0
        aux = [self.output_ids, self.bootstrap_room]
        a.aux_data_ptrs = [b.ctypes.data for b in aux]
        a.aux_data_lens = [b.nbytes for b in aux]
        a.aux_item_lens = [b[0].nbytes for b in aux]
        if self.state is not None:
            a.state_types = ["mamba"]
            a.state_data_ptrs = [[self.state.ctypes.data]]
            a.state_data_lens = [[self.state.nbytes]]
            a.state_item_lens = [[STATE_ITEM]]
        else:
            a.state_types = []
        return a


def run_bootstrap(opts):
    B.KVBootstrapServer("127.0.0.1", opts.bootstrap_port)
    print("ready", flush=True)
    sys.stdin.read()  # until the parent closes it


def run_prefill(opts, group, pool, mgr, rooms):
    mine = [r for r in rooms if r["prefill"] == opts.instance]
    out = {"rooms": {}, "group_lost": False}
    alloc = Pages(len(pool.kv[0]))
    active, todo, i = [], list(mine), 0
    while todo or active:
        while todo and len(active) < WINDOW:
            r = todo.pop(0)
            r = dict(r, row=i % AUX_ROWS, slot=i % STATE_SLOTS, first=alloc.take(r["pages"]),
                     sent=0,
                     step="boot", sender=B.KVSender(mgr, f"127.0.0.1:{opts.bootstrap_port}",
                                                  r["room"]))
            active.append(r)
            i += 1
        try:
            red = group.min([r["sender"].poll() for r in active])
        except (ConnectionError, OSError):
            out["group_lost"] = True  # a rank of the group died: stop driving, as SGLang's
            HUNG.extend(active)       # survivors hang in their collective, holding their rooms
            break
        moved = False
        for r, state in zip(list(active), red):
            s, room = r["sender"], r["room"]
            if state == B.KVPoll.Failed:
                try:
                    s.failure_exception()
                except Exception as e:  # the backend's KVTransferError
                    out["rooms"][str(room)] = {"ok": False, "why": str(getattr(e, "failure_reason", e))}
                s.clear()
                active.remove(r)
            elif state == B.KVPoll.Success:
                out["rooms"][str(room)] = {"ok": True,
                                           "bytes": s.get_transfer_metric().transfer_total_bytes}
                s.clear()
                active.remove(r)
            elif r["step"] == "boot" and state == B.KVPoll.WaitingForInput:
                for p in range(0 if opts.no_verify else r["pages"]):  # "compute" the room's KV
                    for b in range(2 * LAYERS):
                        pool.kv[b][r["first"] + p] = page_values(room, p, b % LAYERS, b // LAYERS,
                                                                 pool.heads, pool.total_heads)
                pool.output_ids[r["row"]] = room % 50000
                pool.bootstrap_room[r["row"]] = 0
                pool.bootstrap_room[r["row"], 0] = room
                if pool.state is not None:
                    pool.state[r["slot"]] = state_values(room, opts.tp_rank)
                assert s.pop_decode_prefix_len() == 0
                s.init(r["pages"], r["row"])
                r["step"] = "send"
                moved = True
            elif r["step"] == "send" and state >= B.KVPoll.WaitingForInput:
                n = min(CHUNK, r["pages"] - r["sent"])
                last = r["sent"] + n == r["pages"]
                if s.should_send_kv_chunk(n, last):
                    idx = np.arange(r["first"] + r["sent"], r["first"] + r["sent"] + n,
                                    dtype=np.int32)
                    states = [[r["slot"]]] if (last and pool.state is not None) else None
                    s.send(idx, states)
                r["sent"] += n
                if last:
                    r["step"] = "wait"
                moved = True
        if not moved:
            time.sleep(opts.idle_us / 1e6)
    return out


def run_decode(opts, group, pool, mgr, rooms):
    out = {"rooms": {}, "after_down": {}}
    alloc = Pages(len(pool.kv[0]))
    page_bytes = sum(b[0].nbytes for b in pool.kv)
    active, todo, i, done = [], list(rooms), 0, 0
    watching = []  # failed for the group, this rank's own poll not yet Failed
    down = set()  # prefill instances seen failing
    addr = {k: f"127.0.0.1:{p}" for k, p in enumerate(opts.prefill_ports)}
    progress = opts.progress if opts.tp_rank == 0 else ""
    while todo or active or watching:
        while todo and len(active) < WINDOW:
            r = todo.pop(0)
            rec = B.KVReceiver(mgr, addr[r["prefill"]], r["room"])
            rec.init(0)
            r = dict(r, row=i % AUX_ROWS, slot=i % STATE_SLOTS, rec=rec, step="hs",
                     opened=time.monotonic(), after_down=r["prefill"] in down)
            r["opened_at"] = time.time()
            out.setdefault("first_open", r["opened_at"])
            active.append(r)
            i += 1
        # Every rank's `active` is the same list (decided on the group's polls): they
        # stop calling the collective together; `watching` is this rank's own.
        red = group.min([r["rec"].poll() for r in active]) if active else []
        moved = False
        for r in list(watching):
            rec = r["rec"]
            own = rec.poll() == B.KVPoll.Failed
            if not own and time.monotonic() - r["group_failed"] < 15:
                continue
            why = "(this rank's poll never said Failed)"
            if own:
                try:
                    rec.failure_exception()
                except Exception as e:  # the backend's KVTransferError
                    why = str(getattr(e, "failure_reason", e))
            out["rooms"][str(r["room"])] = {"ok": False, "why": why, "prefill": r["prefill"],
                                            "own_failed": own, "failed_at": time.time(),
                                            "opened_at": r["opened_at"]}
            rec.clear()
            watching.remove(r)
        for r, state in zip(list(active), red):
            rec, room = r["rec"], r["room"]
            if state == B.KVPoll.Failed:
                # The group's MIN says Failed: SGLang aborts the request now. This
                # rank's own poll is watched on (outside the group's vector) until
                # it says Failed too, for the record of when every rank knew.
                r["group_failed"] = time.monotonic()
                watching.append(r)
                if r["after_down"]:
                    out["after_down"][str(room)] = time.monotonic() - r["opened"]
                down.add(r["prefill"])
                active.remove(r)
                done += 1
                moved = True
            elif r["step"] == "hs" and state == B.KVPoll.WaitingForInput:
                r["first"] = alloc.take(r["pages"])
                pool.bootstrap_room[r["row"]] = 0
                pool.output_ids[r["row"]] = -1
                idx = np.arange(r["first"], r["first"] + r["pages"], dtype=np.int32)
                rec.send_metadata(idx, r["row"], [[r["slot"]]] if pool.state is not None else None)
                r["step"] = "xfer"
                moved = True
            elif r["step"] == "xfer" and state == B.KVPoll.Success:
                if int(pool.bootstrap_room[r["row"], 0]) == 0:
                    continue  # SGLang's metadata gate: Transferring until the room lands
                out["rooms"][str(room)] = {"ok": True,
                                           "bad": [] if opts.no_verify else check(opts, pool, r),
                                           "latency_s": time.monotonic() - r["opened"],
                                           "kv_bytes": r["pages"] * page_bytes,
                                           "done_at": time.time(),
                                           "prefill": r["prefill"],
                                           "metric": rec.get_transfer_metric().transfer_total_bytes}
                rec.clear()
                active.remove(r)
                done += 1
                moved = True
        if progress and moved:
            with open(progress + ".tmp", "w") as f:
                f.write(str(done))
            os.replace(progress + ".tmp", progress)
        if not moved:
            time.sleep(opts.idle_us / 1e6)
    return out


def check(opts, pool, r):
    """What differs from what prefill computed: a list of short descriptions."""
    bad = []
    room = r["room"]
    for p in range(r["pages"]):
        for b in range(2 * LAYERS):
            want = page_values(room, p, b % LAYERS, b // LAYERS, pool.heads, pool.total_heads)
            if not np.array_equal(pool.kv[b][r["first"] + p], want):
                bad.append(f"page {p} buffer {b}")
    if int(pool.output_ids[r["row"], 0]) != room % 50000:
        bad.append("aux output_ids")
    if int(pool.bootstrap_room[r["row"], 0]) != room:
        bad.append("aux bootstrap_room")
    if pool.state is not None and opts.tp_size == opts.peer_tp_size:
        if not np.array_equal(pool.state[r["slot"]], state_values(room, opts.tp_rank)):
            bad.append("state")
    return bad


def main():
    global LAYERS, HEAD_DIM, PAGE, WINDOW
    ap = argparse.ArgumentParser()
    ap.add_argument("--role", required=True, choices=["prefill", "decode", "bootstrap"])
    ap.add_argument("--tp-rank", type=int, default=0)
    ap.add_argument("--tp-size", type=int, default=1)
    ap.add_argument("--peer-tp-size", type=int, default=1)
    ap.add_argument("--total-heads", type=int, default=4)
    ap.add_argument("--bootstrap-port", type=int, default=0)
    ap.add_argument("--prefill-ports", type=int, nargs="*", default=[])
    ap.add_argument("--instance", type=int, default=0)
    ap.add_argument("--instances", type=int, default=1)
    ap.add_argument("--group-port", type=int, default=0)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--state", action="store_true")
    ap.add_argument("--progress", default="")
    ap.add_argument("--out", default="")
    ap.add_argument("--backend", default="kvferry")
    ap.add_argument("--transport", default="")
    ap.add_argument("--layers", type=int, default=LAYERS)
    ap.add_argument("--head-dim", type=int, default=HEAD_DIM)
    ap.add_argument("--page", type=int, default=PAGE)
    ap.add_argument("--min-pages", type=int, default=1)
    ap.add_argument("--max-pages", type=int, default=12)
    ap.add_argument("--pool-pages", type=int, default=0)
    ap.add_argument("--window", type=int, default=WINDOW)
    ap.add_argument("--no-verify", action="store_true")
    ap.add_argument("--idle-us", type=float, default=500, help="sleep of an idle scheduler tick")
    opts = ap.parse_args()
    LAYERS, HEAD_DIM, PAGE, WINDOW = opts.layers, opts.head_dim, opts.page, opts.window
    if opts.transport:
        os.environ["KVFERRY_TRANSPORT"] = opts.transport
    load_backend(opts.backend)
    if opts.role == "bootstrap":
        return run_bootstrap(opts)
    rooms = workload(opts.seed, opts.requests, opts.instances, opts.min_pages, opts.max_pages)
    pages = opts.pool_pages or sum(r["pages"] for r in rooms) + 1
    heads = opts.total_heads // opts.tp_size
    pool = Pool(pages, heads, opts.total_heads, opts.tp_rank, opts.state)
    mode = "prefill" if opts.role == "prefill" else "decode"
    args = pool.kv_args(opts.tp_rank)
    server_args = ServerArgs(opts.tp_size, opts.bootstrap_port)
    if hasattr(B, "make_manager"):  # a backend that needs SGLang's own ServerArgs
        mgr = B.make_manager(args, mode, server_args)
    else:
        mgr = B.KVManager(args, mode, server_args, False)
    group = Group(opts.tp_rank, opts.tp_size, opts.group_port)
    started = time.monotonic()
    result = (run_prefill if mode == "prefill" else run_decode)(opts, group, pool, mgr, rooms)
    result["seconds"] = time.monotonic() - started
    if opts.out:
        with open(opts.out, "w") as f:
            json.dump(result, f)
    if result.get("group_lost"):
        time.sleep(float(os.environ.get("KVFERRY_TEST_HANG_S", "30")))  # a survivor hangs
    if hasattr(mgr, "teardown"):
        try:
            mgr.teardown()  # stops the rank's runtime before its buffers go
        except NotImplementedError:
            pass
    os._exit(0)  # the runtime's threads stop with the process, as a killed scheduler's would


if __name__ == "__main__":
    main()
