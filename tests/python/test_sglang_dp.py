"""kvferry.sglang with DP attention: SGLang's dp_size and enable_dp_attention,
KVSender's req_has_disagg_prefill_dp_rank and KVReceiver.init(prefill_dp_rank).

Prefill TP 4 in two DP groups (attention TP 2 each, one KV head per rank)
-> decode TP 2 in two DP groups (attention TP 1, both heads), in one process:
one bootstrap serves both prefill groups, each decode group has its decider on
the decode bootstrap port + its group. A room moves from the prefill group the
decode queue names to the decode group that holds it, byte for byte.

A second pair routes rooms as SGLang does with a load_balance_method other
than follow_bootstrap_room: each prefill rank registers its group for the
room at the bootstrap, and the decode queue asks for it
(CommonKVReceiver.query_prefill_dp_ranks, which the plugin hands to kvferry).
"""

import socket
import time

import numpy as np
import pytest

from kvferry import sglang_plugin
from kvferry.sglang import (DPShape, KVBootstrapServer, KVManager, KVPoll, KVReceiver, KVSender,
                            dp_shape, query_prefill_dp_ranks)
from kvferry.rank_driver import Pool, ServerArgs, load_backend, page_values

from test_sglang_backend import wait_for

PAGES = 32
load_backend("kvferry")


def adjacent_free_ports(n):
    """A port p with p .. p + n - 1 free on 127.0.0.1 (the decode groups' deciders)."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + n > 65535:
            continue
        socks = []
        try:
            for i in range(n):
                t = socket.socket()
                socks.append(t)
                t.bind(("127.0.0.1", base + i))
            return base
        except OSError:
            continue
        finally:
            for t in socks:
                t.close()
    raise RuntimeError(f"no {n} adjacent free ports")


def dp_args(tp, dp, port, load_balance_method=None):
    sa = ServerArgs(tp, port)
    sa.dp_size = dp
    sa.enable_dp_attention = True
    if load_balance_method is not None:
        sa.load_balance_method = load_balance_method
    return sa


def ensure_info(mgr, addr):
    """SGLang's decode queue: try_ensure_parallel_info until the prefill's shape is known."""
    deadline = time.monotonic() + 10
    while not mgr.try_ensure_parallel_info(addr):
        assert time.monotonic() < deadline, f"the DP shape of {addr} never came"
        time.sleep(0.05)


def make_pair(load_balance_method=None):
    boot = adjacent_free_ports(1)
    dec_port = adjacent_free_ports(2)
    server = KVBootstrapServer("127.0.0.1", boot)
    pre, pre_pools = [], []
    for tp_rank in range(4):  # global TP rank: group tp_rank // 2, attention rank tp_rank % 2
        pool = Pool(PAGES, 1, 2, tp_rank % 2, with_state=False)
        pre_pools.append(pool)
        pre.append(KVManager(pool.kv_args(tp_rank), "prefill",
                             dp_args(4, 2, boot, load_balance_method), False))
    dec, dec_pools = [], []
    for group in range(2):  # decode's engine_rank is the attention rank; the group is SGLang's
        pool = Pool(PAGES, 2, 2, 0, with_state=False)
        args = pool.kv_args(0)
        args.system_dp_rank = group
        dec_pools.append(pool)
        dec.append(KVManager(args, "decode", dp_args(2, 2, dec_port), False))
    return dict(server=server, boot=boot, addr=f"127.0.0.1:{boot}", pre=pre, pre_pools=pre_pools,
                dec=dec, dec_pools=dec_pools, lb=load_balance_method)


@pytest.fixture(scope="module")
def dp_pair():
    p = make_pair()
    yield p
    for m in p["pre"] + p["dec"]:
        m.teardown()


@pytest.fixture(scope="module")
def dp_registered():
    """Prefill with load_balance_method round_robin: rooms are registered."""
    p = make_pair("round_robin")
    yield p
    for m in p["pre"] + p["dec"]:
        m.teardown()


def move(p, room, pgroup, dgroup, src, dst, row, router_rank=False, query=False):
    """One room from prefill group `pgroup` to decode group `dgroup`; the final polls.

    query: as SGLang's decode queue does for registered rooms, the receiver
    is made, the prefill senders register the room, and the decode side asks
    the bootstrap for the room's group before init.
    """
    addr = p["addr"]
    dmgr, dpool = p["dec"][dgroup], p["dec_pools"][dgroup]
    ensure_info(dmgr, addr)
    r = KVReceiver(dmgr, addr, room)
    if not query:
        r.init(pgroup)
    senders = []
    for a in range(2):
        mgr, pool = p["pre"][2 * pgroup + a], p["pre_pools"][2 * pgroup + a]
        for i, page in enumerate(src):
            for b in range(len(pool.kv)):
                pool.kv[b][page] = page_values(room, i, b % 2, b // 2, pool.heads, 2)
        pool.output_ids[row] = 9
        pool.bootstrap_room[row, 0] = room
        senders.append(KVSender(mgr, addr, room, req_has_disagg_prefill_dp_rank=router_rank))
    if query:
        assert r.poll() == KVPoll.Bootstrapping  # waits for its group, as SGLang's pending_reqs
        found = query_prefill_dp_ranks(addr, [room, room + 1])
        assert found == {str(room): pgroup}
        r.init(found[str(room)])
    dpool.bootstrap_room[row] = 0
    wait_for([r], {KVPoll.WaitingForInput})
    r.send_metadata(np.asarray(dst, dtype=np.int32), row)
    wait_for(senders, {KVPoll.WaitingForInput})
    for s in senders:
        s.init(len(src), row)
        s.send(np.asarray(src, dtype=np.int32))
    polls = wait_for(senders + [r], {KVPoll.Success, KVPoll.Failed})
    if all(x == KVPoll.Success for x in polls):
        for i, page in enumerate(dst):
            for b in range(len(dpool.kv)):
                want = page_values(room, i, b % 2, b // 2, dpool.heads, 2)
                assert np.array_equal(dpool.kv[b][page], want), (room, i, b)
        assert int(dpool.bootstrap_room[row, 0]) == room
    for o in senders + [r]:
        o.clear()
    return polls


def test_dp_shape_follows_sglang():
    args = type("A", (), {})()
    args.engine_rank = 5
    sa = dp_args(8, 4, 1)
    assert dp_shape(args, sa, "prefill") == DPShape(4, 2, 2, 1)
    args.engine_rank = 1  # decode: engine_rank is the attention rank, the group SGLang's
    args.system_dp_rank = 3
    assert dp_shape(args, sa, "decode") == DPShape(4, 3, 2, 1)
    sa.enable_dp_attention = False  # DP replicas: each a whole TP group
    args.system_dp_rank = 2
    assert dp_shape(args, sa, "decode") == DPShape(4, 2, 8, 1)
    assert dp_shape(args, ServerArgs(8, 1), "prefill") == DPShape(1, None, 8, 1)
    with pytest.raises(ValueError, match="tp_size 6 with dp_size 4"):
        dp_shape(args, dp_args(6, 4, 1), "prefill")
    args.system_dp_rank = 4
    with pytest.raises(ValueError, match="DP rank 4; expected 0 to 3"):
        dp_shape(args, dp_args(8, 4, 1), "decode")
    del args.system_dp_rank
    with pytest.raises(ValueError, match="attention-DP rank is not known"):
        dp_shape(args, dp_args(8, 4, 1), "decode")


def test_decode_learns_the_prefill_dp_size_from_the_bootstrap(dp_pair):
    dmgr = dp_pair["dec"][0]
    ensure_info(dmgr, dp_pair["addr"])
    info = dmgr.prefill_info_table[dp_pair["addr"]]
    assert info.dp_size == 2 and info.follow_bootstrap_room
    assert dp_pair["pre"][3].instance.endswith("/dp1")
    assert dp_pair["dec"][1].instance.endswith("/dp1")
    # Nothing serves there: SGLang asks again later.
    assert not dmgr.try_ensure_parallel_info("127.0.0.1:1")


@pytest.mark.parametrize("pgroup,dgroup", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_a_room_moves_from_its_prefill_group_to_its_decode_group(dp_pair, pgroup, dgroup):
    # bootstrap_room % dp_size names the prefill group (follow_bootstrap_room).
    room = 2000 + 10 * (2 * pgroup + dgroup) + pgroup
    polls = move(dp_pair, room, pgroup, dgroup, [1, 2, 3], [7, 8, 9], 2 + dgroup)
    assert polls == [KVPoll.Success] * 3


def test_the_routers_prefill_dp_rank_overrides_the_room(dp_pair):
    room = 3001  # room % 2 == 1, but the router sent it to group 0
    assert move(dp_pair, room, 0, 1, [4, 5], [10, 11], 4, router_rank=True) == \
        [KVPoll.Success] * 3


def test_a_room_dispatched_against_follow_bootstrap_room_fails_at_once(dp_pair):
    s = KVSender(dp_pair["pre"][0], dp_pair["addr"], 4001)  # group 0, room implies group 1
    assert s.poll() == KVPoll.Failed
    with pytest.raises(Exception, match="follow_bootstrap_room conflict: dispatched to dp_rank 0 "
                                        "but bootstrap_room 4001 implies dp_rank 1"):
        s.failure_exception()
    s.clear()
    # The groups carry on.
    assert move(dp_pair, 4003, 1, 0, [6], [12], 5) == [KVPoll.Success] * 3


def test_a_prefill_dp_rank_out_of_range_fails_the_room_naming_it(dp_pair):
    dmgr = dp_pair["dec"][0]
    ensure_info(dmgr, dp_pair["addr"])
    r = KVReceiver(dmgr, dp_pair["addr"], 5001)
    r.init(2)
    assert r.poll() == KVPoll.Failed
    with pytest.raises(Exception, match="prefill_dp_rank 2; expected 0 to 1"):
        r.failure_exception()


# -- rooms registered at the bootstrap (load_balance_method not follow_bootstrap_room) --

def test_decode_learns_that_rooms_are_registered(dp_registered):
    dmgr = dp_registered["dec"][0]
    ensure_info(dmgr, dp_registered["addr"])
    info = dmgr.prefill_info_table[dp_registered["addr"]]
    assert info.dp_size == 2 and not info.follow_bootstrap_room
    assert not dp_registered["pre"][0].rooms_follow


@pytest.mark.parametrize("pgroup,dgroup", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_a_registered_room_moves_from_the_group_that_took_it(dp_registered, pgroup, dgroup):
    # The room's number says nothing: room % 2 is the other group each time.
    room = 6000 + 10 * (2 * pgroup + dgroup) + (1 - pgroup)
    polls = move(dp_registered, room, pgroup, dgroup, [1, 2], [7, 8], 2 + dgroup, query=True)
    assert polls == [KVPoll.Success] * 3


def test_a_room_two_groups_register_fails_on_the_second(dp_registered):
    p = dp_registered
    first = KVSender(p["pre"][0], p["addr"], 6101)  # group 0 takes it
    second = KVSender(p["pre"][2], p["addr"], 6101)  # group 1 asks for it too
    assert first.poll() != KVPoll.Failed
    assert second.poll() == KVPoll.Failed
    with pytest.raises(Exception, match="room 6101 of prefill instance .* is served by DP group "
                                        "0; refused DP group 1"):
        second.failure_exception()
    assert query_prefill_dp_ranks(p["addr"], [6101]) == {"6101": 0}
    first.clear()
    second.clear()
    # The groups carry on.
    assert move(p, 6103, 1, 0, [3], [9], 4, query=True) == [KVPoll.Success] * 3


def test_a_room_no_prefill_rank_registers_fails_by_its_deadline(dp_registered, monkeypatch):
    monkeypatch.setenv("KVFERRY_DP_RESOLVE_TIMEOUT_S", "0.3")
    p = dp_registered
    ensure_info(p["dec"][0], p["addr"])
    r = KVReceiver(p["dec"][0], p["addr"], 6201)
    assert query_prefill_dp_ranks(p["addr"], [6201]) == {}
    assert r.poll() == KVPoll.Bootstrapping
    time.sleep(0.4)
    assert r.poll() == KVPoll.Failed
    with pytest.raises(Exception, match="room 6201: its prefill DP group was not resolved in 0.3 s"):
        r.failure_exception()
    r.clear()


def test_a_prefill_rank_that_contradicts_the_routing_is_refused(dp_registered):
    p = dp_registered
    pool = Pool(PAGES, 1, 2, 0, with_state=False)
    with pytest.raises(ValueError, match="routes rooms to DP groups by registered rooms as its "
                                         "ranks said; refused a rank's follow_bootstrap_room"):
        KVManager(pool.kv_args(0), "prefill", dp_args(4, 2, p["boot"]), False)
    # The instance carries on.
    assert move(p, 6301, 0, 1, [5], [10], 5, query=True) == [KVPoll.Success] * 3


def test_the_plugin_hands_kvferry_bootstraps_to_kvferry(dp_registered):
    p = dp_registered
    ensure_info(p["dec"][0], p["addr"])
    s = KVSender(p["pre"][2], p["addr"], 6401)  # group 1 registers the room
    called = []

    def sglang_http_query(addr, rooms):
        called.append(addr)
        return {"from": "sglang"}

    hook = sglang_plugin._query_prefill_dp_ranks
    assert hook(sglang_http_query, p["addr"], [6401]) == {"6401": 1}
    assert called == []
    assert hook(sglang_http_query, "127.0.0.1:1", [6401]) == {"from": "sglang"}
    assert called == ["127.0.0.1:1"]
    s.abort()
    s.clear()
