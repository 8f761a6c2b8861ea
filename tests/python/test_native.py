"""kvferry._native from Python (issue 14, first slice): one process holds a
prefill instance (its bootstrap and one rank) and a decode instance (one
rank), both over numpy buffers; rooms move every byte, and bad input raises
ValueError naming the value."""

import time

import numpy as np
import pytest

import kvferry
from kvferry import KVPoll

LAYERS, HEADS, HEAD_DIM, PAGE, PAGES = 2, 2, 8, 4, 16
ITEM = PAGE * HEADS * HEAD_DIM * 2  # bf16
AUX_ITEM, AUX_ROWS = 64, 8


class Pool:
    """K and V of every layer, and one aux buffer, in numpy arrays."""

    def __init__(self, seed):
        rng = np.random.default_rng(seed)
        self.kv = [rng.integers(0, 256, PAGES * ITEM, dtype=np.uint8) for _ in range(2 * LAYERS)]
        self.aux = [rng.integers(0, 256, AUX_ROWS * AUX_ITEM, dtype=np.uint8)]

    def args(self):
        return dict(
            page_size=PAGE, dtype="bf16", layers=LAYERS, total_kv_heads=HEADS, kv_heads=HEADS,
            head_dim=HEAD_DIM, mla=False,
            kv_ptrs=[a.ctypes.data for a in self.kv], kv_lens=[a.nbytes for a in self.kv],
            kv_item_lens=[ITEM] * len(self.kv),
            aux_ptrs=[a.ctypes.data for a in self.aux], aux_lens=[a.nbytes for a in self.aux],
            aux_item_lens=[AUX_ITEM] * len(self.aux))

    def page(self, buffer, page):
        return self.kv[buffer][page * ITEM:(page + 1) * ITEM]


@pytest.fixture(scope="module")
def pair():
    node = kvferry.Node()
    port = node.serve_bootstrap("py-prefill", "127.0.0.1", 0)
    src, dst = Pool(1), Pool(2)
    prefill = kvferry.Rank(node, "prefill", "py-prefill", 0, 1, **src.args(),
                           bootstrap_host="127.0.0.1", bootstrap_port=port)
    decode = kvferry.Rank(node, "decode", "py-decode", 0, 1, **dst.args())
    yield node, port, prefill, decode, src, dst
    del prefill, decode


def wait_terminal(*rooms, seconds=30):
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        states = [r.poll() for r in rooms]
        if all(s in (KVPoll.Success, KVPoll.Failed) for s in states):
            return states
        time.sleep(0.001)
    return [r.poll() for r in rooms]


def test_kvpoll_has_sglangs_ints():
    assert (KVPoll.Failed, KVPoll.Bootstrapping, KVPoll.WaitingForInput, KVPoll.Transferring,
            KVPoll.Success) == (0, 1, 2, 3, 4)


def test_rooms_move_every_byte(pair):
    node, port, prefill, decode, src, dst = pair
    rng = np.random.default_rng(7)
    for room in range(1, 21):
        n = int(rng.integers(1, 6))
        src_pages = [int(p) for p in rng.choice(PAGES, n, replace=False)]
        dst_pages = [int(p) for p in rng.choice(PAGES, n, replace=False)]
        r = decode.receiver(room, "127.0.0.1", port)
        r.init(dst_pages, room % AUX_ROWS)
        s = prefill.sender(room)
        s.init(n, room % AUX_ROWS)
        s.send(src_pages, True)
        states = wait_terminal(s, r)
        assert states == [KVPoll.Success, KVPoll.Success], (room, s.failure(), r.failure())
        for b in range(2 * LAYERS):
            for sp, dp in zip(src_pages, dst_pages):
                assert np.array_equal(src.page(b, sp), dst.page(b, dp)), (room, b, sp, dp)
        s.clear()
        r.clear()


def test_a_room_that_fails_says_why(pair):
    node, port, prefill, decode, src, dst = pair
    r = decode.receiver(100, "127.0.0.1", port)
    r.init([0, 1], 1)
    s = prefill.sender(100)
    s.init(2, 1)
    s.abort()
    states = wait_terminal(s, r)
    assert states == [KVPoll.Failed, KVPoll.Failed]
    assert s.failure() and r.failure()
    assert "abort" in r.failure()


def test_bad_input_raises_value_error_naming_the_value(pair):
    node, port, prefill, decode, src, dst = pair
    r = decode.receiver(200, "127.0.0.1", port)
    with pytest.raises(ValueError, match="page index -1"):
        r.init([-1], 0)
    with pytest.raises(ValueError, match="role \"sideways\""):
        kvferry.Rank(node, "sideways", "x", 0, 1, **Pool(3).args())
    bad = Pool(4).args()
    bad["kv_lens"] = bad["kv_lens"][:-1]
    with pytest.raises(ValueError, match="expected one of each per buffer"):
        kvferry.Rank(node, "decode", "x", 0, 1, **bad)
    with pytest.raises(ValueError, match="dtype \"bf17\""):
        kvferry.Rank(node, "decode", "x", 0, 1, **dict(Pool(5).args(), dtype="bf17"))
