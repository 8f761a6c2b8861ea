"""kvferry.sglang in one process: SGLang's names and call order, and every bad
input of issue 14 raising a clear error while other rooms carry on."""

import time

import numpy as np
import pytest

from kvferry import KVTransferError
from kvferry.sglang import (KVBootstrapServer, KVManager, KVPoll, KVReceiver, KVSender,
                            split_addr)
from kvferry.rank_driver import PAGE, Pool, ServerArgs, load_backend, page_values

from test_sglang_processes import free_ports

PAGES = 64
load_backend("kvferry")  # the driver's pools build kvferry.sglang's KVArgs


@pytest.fixture(scope="module")
def pair():
    boot, dec_port = free_ports(2)
    server = KVBootstrapServer("127.0.0.1", boot)
    pools = {side: Pool(PAGES, 2, 2, 0, with_state=False) for side in ("prefill", "decode")}
    pre = KVManager(pools["prefill"].kv_args(0), "prefill", ServerArgs(1, boot), False)
    dec = KVManager(pools["decode"].kv_args(0), "decode", ServerArgs(1, dec_port), False)
    yield dict(server=server, boot=boot, pools=pools, pre=pre, dec=dec, next_room=[1000])
    pre.teardown()
    dec.teardown()


def new_room(pair):
    pair["next_room"][0] += 1
    return pair["next_room"][0]


def wait_for(objs, states, limit=30):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        polls = [o.poll() for o in objs]
        if all(p in states for p in polls):
            return polls
        time.sleep(0.002)
    pytest.fail(f"polls {[o.poll() for o in objs]} never reached {states}")


def open_room(pair, room=None):
    room = room or new_room(pair)
    s = KVSender(pair["pre"], f"127.0.0.1:{pair['boot']}", room)
    r = KVReceiver(pair["dec"], f"127.0.0.1:{pair['boot']}", room)
    assert r.poll() == KVPoll.Bootstrapping  # before init, as SGLang expects
    r.init(0)
    # Decode's handshake ends first; prefill waits for decode's pages (send_metadata).
    wait_for([r], {KVPoll.WaitingForInput})
    assert s.poll() == KVPoll.Bootstrapping
    return room, s, r


def move(pair, room, s, r, src, dst, row):
    """SGLang's call order on both sides; returns the final polls."""
    pool_p, pool_d = pair["pools"]["prefill"], pair["pools"]["decode"]
    for i, p in enumerate(src):
        for b in range(len(pool_p.kv)):
            pool_p.kv[b][p] = page_values(room, i, b % 2, b // 2, pool_p.heads, 2)
    pool_p.output_ids[row] = 7
    pool_p.bootstrap_room[row, 0] = room
    pool_d.bootstrap_room[row] = 0
    r.send_metadata(np.asarray(dst, dtype=np.int32), row)
    wait_for([s], {KVPoll.WaitingForInput})
    assert s.pop_decode_prefix_len() == 0
    s.init(len(src), row)
    s.send(np.asarray(src[:2], dtype=np.int32))
    s.send(np.asarray(src[2:], dtype=np.int32))
    polls = wait_for([s, r], {KVPoll.Success, KVPoll.Failed})
    if polls == [KVPoll.Success] * 2:
        for i, p in enumerate(dst):
            for b in range(len(pool_d.kv)):
                want = page_values(room, i, b % 2, b // 2, pool_d.heads, 2)
                assert np.array_equal(pool_d.kv[b][p], want), (room, i, b)
        assert int(pool_d.bootstrap_room[row, 0]) == room  # SGLang's metadata gate opens
        assert int(pool_d.output_ids[row, 0]) == 7
    return polls


def test_kvpoll_has_sglangs_ints():
    assert (KVPoll.Failed, KVPoll.Bootstrapping, KVPoll.WaitingForInput, KVPoll.Transferring,
            KVPoll.Success) == (0, 1, 2, 3, 4)


def test_a_room_moves_with_sglangs_call_order(pair):
    room, s, r = open_room(pair)
    assert move(pair, room, s, r, [1, 2, 3, 4, 5], [10, 11, 12, 13, 14], 3) == [KVPoll.Success] * 2
    m = s.get_transfer_metric()
    assert m.transfer_latency_s is not None and m.transfer_latency_s > 0
    assert m.transfer_total_bytes == 5 * pair["pre"].kv_page_bytes + pair["pre"].aux_row_bytes
    s.clear()
    r.clear()


def test_decode_prefix_reuse_moves_only_the_tokens_decode_lacks(pair):
    pool_p, pool_d = pair["pools"]["prefill"], pair["pools"]["decode"]
    room, s, r = open_room(pair)
    held = 3 if PAGE > 3 else 0
    prefix = 2 * PAGE + held  # two whole pages cached on decode and part of the third
    src, dst, row = [40, 41, 42], [50, 51, 52], 6
    for i, p in enumerate(src):
        for b in range(len(pool_p.kv)):
            pool_p.kv[b][p] = page_values(room, i, b % 2, b // 2, pool_p.heads, 2)
    for b in range(len(pool_d.kv)):
        pool_d.kv[b][dst[0]] = 0xABCD  # what decode holds of the first page
    pool_p.bootstrap_room[row, 0] = room
    # SGLang: kv_indices = pages of req_to_token[decode_prefix_len:]
    r.send_metadata(np.asarray(dst, dtype=np.int32), row, None, prefix)
    wait_for([s], {KVPoll.WaitingForInput})
    assert s.pop_decode_prefix_len() == prefix
    assert s.pop_decode_prefix_len() == 0  # popped, as SGLang's dict pop
    s.init(len(src), row)
    s.send(np.asarray(src, dtype=np.int32))
    assert wait_for([s, r], {KVPoll.Success, KVPoll.Failed}) == [KVPoll.Success] * 2
    for i, p in enumerate(dst):
        for b in range(len(pool_d.kv)):
            want = page_values(room, i, b % 2, b // 2, pool_d.heads, 2)
            got = pool_d.kv[b][p]
            if i == 0:
                assert (got[:held] == 0xABCD).all(), (room, b)
                assert np.array_equal(got[held:], want[held:]), (room, b)
            else:
                assert np.array_equal(got, want), (room, i, b)
    token = pair["pre"].kv_page_bytes // PAGE
    moved = 3 * pair["pre"].kv_page_bytes - held * token + pair["pre"].aux_row_bytes
    assert s.get_transfer_metric().transfer_total_bytes == moved
    assert r.get_transfer_metric().transfer_total_bytes == moved
    s.clear()
    r.clear()


def test_checksums_checked_by_decode_pass_a_room_and_refuse_a_bad_name(monkeypatch):
    boot, dec_port, bad_port = free_ports(3)
    server = KVBootstrapServer("127.0.0.1", boot)
    pools = {side: Pool(PAGES, 2, 2, 0, with_state=False) for side in ("prefill", "decode")}
    pre = KVManager(pools["prefill"].kv_args(0), "prefill", ServerArgs(1, boot), False)
    monkeypatch.delenv("KVFERRY_CHECKSUM", raising=False)
    args = ServerArgs(1, dec_port)
    args.disaggregation_enable_kv_checksum = True  # SGLang's flag turns kvferry's checks on
    dec = KVManager(pools["decode"].kv_args(0), "decode", args, False)
    assert dec.checksum == "xxh3" and pre.checksum == "off"
    assert dec.should_verify_kv_checksum(f"127.0.0.1:{boot}") is False  # kvferry checks
    monkeypatch.setenv("KVFERRY_CHECKSUM", "adler32")
    with pytest.raises(ValueError, match='checksum "adler32"; expected off or xxh3'):
        KVManager(pools["decode"].kv_args(0), "decode", ServerArgs(1, bad_port), False)
    p = dict(server=server, boot=boot, pools=pools, pre=pre, dec=dec, next_room=[5000])
    try:
        room, s, r = open_room(p)
        assert move(p, room, s, r, [1, 2, 3, 4], [9, 8, 7, 6], 2) == [KVPoll.Success] * 2
        s.clear()
        r.clear()
    finally:
        pre.teardown()
        dec.teardown()


def test_bad_input_raises_and_costs_nothing_else(pair):
    # A room opened before the bad calls, finished after them.
    room, s_good, r_good = open_room(pair)
    bad_room, s, r = open_room(pair)

    with pytest.raises(ValueError, match="send before init"):
        s.send(np.asarray([1], dtype=np.int32))
    with pytest.raises(ValueError, match="aux_index 999"):
        s.init(3, 999)
    s.init(3, 5)
    with pytest.raises(ValueError, match=f"page index {PAGES}; expected 0 to {PAGES - 1}"):
        s.send(np.asarray([1, PAGES], dtype=np.int32))
    with pytest.raises(ValueError, match="page index -1"):
        s.send(np.asarray([-1], dtype=np.int32))
    with pytest.raises(ValueError, match="dtype float"):
        s.send(np.asarray([1.0, 2.0]))
    with pytest.raises(ValueError, match="4 pages sent in all; expected 3"):
        s.send(np.asarray([1, 2, 3, 4], dtype=np.int32))
    with pytest.raises(ValueError, match="init called twice"):
        s.init(3, 5)
    with pytest.raises(ValueError, match=f"page index {PAGES + 5}"):
        r.send_metadata(np.asarray([1, 2, PAGES + 5], dtype=np.int32), 5)
    with pytest.raises(ValueError, match="aux_index -1"):
        r.send_metadata(np.asarray([1, 2, 3], dtype=np.int32), -1)
    with pytest.raises(ValueError, match="decode_prefix_len -4; expected 0 or more tokens"):
        r.send_metadata(np.asarray([1, 2, 3], dtype=np.int32), 5, None, -4)
    r.send_metadata(np.asarray([20, 21, 22], dtype=np.int32), 5)
    with pytest.raises(ValueError, match="send_metadata called twice"):
        r.send_metadata(np.asarray([20, 21, 22], dtype=np.int32), 5)
    s.send(np.asarray([30, 31, 32], dtype=np.int32))
    with pytest.raises(KVTransferError, match="send after the last chunk"):
        s.send(np.asarray([33], dtype=np.int32))
    assert wait_for([s, r], {KVPoll.Success}) == [KVPoll.Success] * 2
    s.clear()
    r.clear()

    # Construction errors name the value.
    with pytest.raises(ValueError, match="bootstrap_addr 'nohost'"):
        KVReceiver(pair["dec"], "nohost", new_room(pair))
    with pytest.raises(ValueError, match="port from 1 to 65535"):
        split_addr("h:70000")
    with pytest.raises(ValueError, match="a KVSender on a decode manager"):
        KVSender(pair["dec"], "127.0.0.1:1", new_room(pair))
    with pytest.raises(ValueError, match="bootstrap_room -1"):
        KVSender(pair["pre"], "127.0.0.1:1", -1)

    # The room opened before all this still moves, byte for byte.
    polls = move(pair, room, s_good, r_good, [40, 41, 42], [50, 51, 52], 6)
    assert polls == [KVPoll.Success] * 2
    s_good.clear()
    r_good.clear()


def test_page_counts_that_disagree_fail_the_room_on_both_sides(pair):
    room, s, r = open_room(pair)
    r.send_metadata(np.asarray([1, 2], dtype=np.int32), 7)
    s.init(3, 7)
    s.send(np.asarray([3, 4, 5], dtype=np.int32))
    assert wait_for([s, r], {KVPoll.Failed}) == [KVPoll.Failed] * 2
    texts = []
    for side in (s, r):
        with pytest.raises(KVTransferError) as e:
            side.failure_exception()
        assert e.value.bootstrap_room == room
        texts.append(e.value.failure_reason)
    assert texts[0] == texts[1], texts
    s.clear()
    r.clear()


def test_abort_fails_the_room_everywhere(pair):
    room, s, r = open_room(pair)
    r.abort()
    assert wait_for([s, r], {KVPoll.Failed}) == [KVPoll.Failed] * 2
    with pytest.raises(KVTransferError, match="abort"):
        s.failure_exception()
    s.clear()
    r.clear()


def test_manager_refuses_what_it_cannot_serve():
    pool = Pool(8, 2, 2, 0, with_state=False)
    with pytest.raises(ValueError, match="disaggregation_mode 'null'"):
        KVManager(pool.kv_args(0), "null", ServerArgs(1, 1), False)
    sa = ServerArgs(1, 1)
    sa.dp_size = 2
    with pytest.raises(ValueError, match="dp_size 2"):
        KVManager(pool.kv_args(0), "prefill", sa, False)
    args = pool.kv_args(0)
    args.kv_data_ptrs = args.kv_data_ptrs[:3]
    with pytest.raises(ValueError, match="3 KV buffers"):
        KVManager(args, "prefill", ServerArgs(1, 1), False)
    args = pool.kv_args(0)
    args.state_types = ["dsa"]
    args.state_data_ptrs, args.state_data_lens, args.state_item_lens = [[1]], [[64]], [[64]]
    with pytest.raises(ValueError, match="state type 'dsa'"):
        KVManager(args, "prefill", ServerArgs(1, 1), False)
    args = pool.kv_args(0)
    args.kv_item_lens = [args.kv_item_lens[0] + 1] * len(args.kv_item_lens)
    with pytest.raises(ValueError):
        KVManager(args, "prefill", ServerArgs(1, 1), False)
