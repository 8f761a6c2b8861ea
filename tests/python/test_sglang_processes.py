"""kvferry.sglang with one Python process per rank, as SGLang runs them
(issue 14): TP 2→2 with chunked rooms, aux rows and a state component;
heterogeneous TP 2→1 and 1→2 with a GQA shape (through staging); kill -9 of a
prefill rank beside a healthy second prefill instance. The rank processes are
kvferry.rank_driver (python -m); each writes what it saw as JSON."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from kvferry.bench import free_ports  # noqa: F401  (test_sglang_backend imports it here)

LIMIT_S = 240  # every process of a case ends by itself well before this


class Cluster:
    """The processes of one case; everything is killed at the end, whatever happened."""

    def __init__(self, tmp_path, env=None):
        self.tmp = tmp_path
        self.procs = {}
        self.env = dict(os.environ, **(env or {}))

    def start(self, name, *args, stdin=False):
        err = open(self.tmp / f"{name}.err", "w")
        p = subprocess.Popen([sys.executable, "-m", "kvferry.rank_driver", *map(str, args)], env=self.env,
                             stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                             stdout=subprocess.PIPE if stdin else subprocess.DEVNULL,
                             stderr=err, text=True)
        self.procs[name] = p
        return p

    def bootstrap(self, port):
        p = self.start(f"bootstrap-{port}", "--role", "bootstrap", "--bootstrap-port", port,
                       stdin=True)
        assert p.stdout.readline().strip() == "ready", self.log(f"bootstrap-{port}")

    def wait(self, names):
        end = time.monotonic() + LIMIT_S
        for n in names:
            try:
                rc = self.procs[n].wait(timeout=max(1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                pytest.fail(f"{n} still running after {LIMIT_S} s:\n{self.logs()}")
            assert rc == 0, f"{n} exited with {rc}:\n{self.log(n)}"

    def result(self, name):
        with open(self.tmp / f"{name}.json") as f:
            return json.load(f)

    def log(self, name):
        path = self.tmp / f"{name}.err"
        return f"--- {name}\n" + (path.read_text()[-3000:] if path.exists() else "")

    def logs(self):
        return "\n".join(self.log(n) for n in self.procs)

    def close(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
            p.wait()


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path, {"KVFERRY_TEST_HANG_S": "3"})
    yield c
    c.close()


def launch(c, role, tp, peer_tp, bootstrap_port, group_port, *extra, name=None):
    names = []
    for r in range(tp):
        n = f"{name or role}{r}"
        c.start(n, "--role", role, "--tp-rank", r, "--tp-size", tp, "--peer-tp-size", peer_tp,
                "--bootstrap-port", bootstrap_port, "--group-port", group_port,
                "--out", c.tmp / f"{n}.json", *extra)
        names.append(n)
    return names


def run_pair(c, prefill_tp, decode_tp, requests, *extra):
    boot, dec_port, pgroup, dgroup = free_ports(4)
    c.bootstrap(boot)
    common = ("--requests", requests, *extra)
    pre = launch(c, "prefill", prefill_tp, decode_tp, boot, pgroup, *common)
    dec = launch(c, "decode", decode_tp, prefill_tp, dec_port, dgroup, "--prefill-ports", boot,
                 *common)
    c.wait(dec + pre)
    return [c.result(n) for n in pre], [c.result(n) for n in dec]


def assert_all_moved(pre, dec, requests):
    for d in dec:
        rooms = d["rooms"]
        assert len(rooms) == requests
        failed = {k: v["why"] for k, v in rooms.items() if not v["ok"]}
        assert not failed, failed
        bad = {k: v["bad"] for k, v in rooms.items() if v["bad"]}
        assert not bad, f"bytes differ on decode: {bad}"
    for p in pre:
        assert len(p["rooms"]) == requests
        assert all(v["ok"] for v in p["rooms"].values())


def test_tp2_to_tp2_chunked_rooms_with_aux_and_state(cluster):
    pre, dec = run_pair(cluster, 2, 2, 200, "--state")
    assert_all_moved(pre, dec, 200)
    # The transfer metric carries what each rank moved: pages, aux row and state.
    for d in dec:
        assert all(v["metric"] > 0 for v in d["rooms"].values())


@pytest.mark.parametrize("prefill_tp,decode_tp", [(2, 1), (1, 2)])
def test_heterogeneous_tp_with_gqa_heads(cluster, prefill_tp, decode_tp):
    # 4 KV heads of 16 dims: each side slices them differently, so every page is
    # cut per head on one side and joined on the other (staging).
    pre, dec = run_pair(cluster, prefill_tp, decode_tp, 60, "--total-heads", 4)
    assert_all_moved(pre, dec, 60)


def test_kill_9_of_a_prefill_rank(cluster):
    c = cluster
    boot_a, boot_b, dec_port, ga, gb, gd = free_ports(6)
    c.bootstrap(boot_a)
    c.bootstrap(boot_b)
    common = ("--requests", 120, "--instances", 2)
    launch(c, "prefill", 2, 2, boot_a, ga, "--instance", 0, *common, name="prefill-a")
    b = launch(c, "prefill", 2, 2, boot_b, gb, "--instance", 1, *common, name="prefill-b")
    progress = c.tmp / "progress"
    dec = launch(c, "decode", 2, 2, dec_port, gd, "--prefill-ports", boot_a, boot_b,
                 "--progress", progress, *common)
    # Kill one rank of instance A once decode has concluded 20 rooms.
    end = time.monotonic() + LIMIT_S
    while not (progress.exists() and int(progress.read_text() or 0) >= 20):
        assert time.monotonic() < end, c.logs()
        assert c.procs[dec[0]].poll() is None, c.log(dec[0])
        time.sleep(0.01)
    c.procs["prefill-a1"].send_signal(signal.SIGKILL)
    c.wait(dec + b)
    d0, d1 = (c.result(n) for n in dec)

    for d in (d0, d1):
        by_instance = {0: [], 1: []}
        for room, v in d["rooms"].items():
            by_instance[v["prefill"]].append(v)
        assert len(d["rooms"]) == 120
        # The healthy instance keeps serving: every room of B moved, byte for byte.
        assert all(v["ok"] and not v["bad"] for v in by_instance[1]), by_instance[1]
        # A's rooms that finished before the kill moved whole; the others failed,
        # each rank's own poll said Failed.
        assert all(not v["bad"] for v in by_instance[0] if v["ok"])
        failed = [v for v in by_instance[0] if not v["ok"]]
        assert failed, "no room of the killed instance failed"
        assert all(v["own_failed"] for v in failed)
        # Rooms opened once A was known dead failed at once, not at a deadline
        # (the shortest is 60 s).
        assert d["after_down"], "no room was opened to A after it died"
        assert max(d["after_down"].values()) < 10, d["after_down"]
    # One cause per room: both decode ranks raise the same text.
    for room, v in d0["rooms"].items():
        assert v["ok"] == d1["rooms"][room]["ok"], room
        if not v["ok"]:
            assert v["why"] == d1["rooms"][room]["why"], room
    causes = {v["why"] for v in d0["rooms"].values() if not v["ok"]}
    # Every cause is the lost rank (its instance dead, or contact lost with it),
    # found by watching it, not by a deadline running out.
    assert all(w.split(": ")[0] in ("instance_dead", "peer_down") for w in causes), causes
    for n in b:
        assert all(v["ok"] for v in c.result(n)["rooms"].values())
