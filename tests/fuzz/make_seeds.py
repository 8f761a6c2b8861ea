#!/usr/bin/env python3
"""Writes the binary seeds of corpus/layout and corpus/planner (the encoding
of fuzz_layout.hpp); the cluster_file seeds are TOML files kept as they are.
Run from anywhere: python3 tests/fuzz/make_seeds.py"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
MLA, HEADS, ITEM, BUFS, VERSION, RUN, STAMP = 1, 2, 4, 8, 16, 32, 64
DERIVED = HEADS | ITEM | BUFS | RUN | STAMP


def n32(v):
    return bytes([v]) if v < 0xF0 else b"\xf0" + v.to_bytes(4, "little")


def n64(v):
    return bytes([v]) if v < 0xF0 else b"\xf0" + v.to_bytes(8, "little")


def layout(page=16, dtype=2, layers=4, first=0, heads=8, dim=64, tp=1, tp_rank=0, pp=1, pp_rank=0,
           mla=False, pages=32, aux=((100, 64, 32),), states=(), flags=DERIVED, offset=0):
    """A layout with derived heads, item lengths and buffers (flags)."""
    f = flags | (MLA if mla else 0)
    out = bytes([f]) + n32(page) + bytes([dtype]) + n32(layers) + n32(first)
    out += n32(heads) + n32(dim) + n32(tp) + n32(tp_rank) + n32(pp) + n32(pp_rank)
    for i in range(layers * (1 if mla else 2)):
        out += n32(1 + i) + n64(offset) + n64(pages)
    out += n32(len(aux))
    for region, item, rows in aux:
        out += n32(region) + n64(0) + n64(item) + n64(rows)
    out += n32(len(states))
    for kind, bufs in states:
        out += bytes([kind]) + n32(len(bufs))
        for region, item, rows in bufs:
            out += n32(region) + n64(0) + n64(item) + n64(rows)
    return out


def peer(tp=1, tp_rank=0, pp=1, pp_rank=0, layers=None, n_buffers=8, pages=32, n_aux=1,
         states=False, offset=0):
    """A layout sharing the previous one's model: all its layers, or `layers`."""
    f = (RUN if layers is None else 0) | (HEADS if states else 0)
    out = bytes([f]) + n32(tp) + n32(tp_rank) + n32(pp) + n32(pp_rank)
    if layers is not None:
        out += n32(len(layers)) + b"".join(n32(x) for x in layers)
    for i in range(n_buffers):
        out += n32(50 + i) + n64(offset) + n64(pages)
    for i in range(n_aux):
        out += n32(200 + i) + n64(0) + n64(32)
    return out


def indices(lists):
    out = b"\x00"
    for l in lists:
        out += n32(len(l)) + b"".join(n32(x) for x in l)
    return out


def write(corpus, name, data):
    d = os.path.join(HERE, "corpus", corpus)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def tail_layout(slot=0, states=()):
    return n32(slot) + indices(states)


def tail_planner(src, dst, max_write=0, slots=(0, 0), states=((), ())):
    out = n32(len(src)) + b"".join(n32(p) for p in src) + b"\x00"
    out += b"".join(n32(p) for p in dst) + n64(max_write) + n32(slots[0]) + n32(slots[1])
    return out + indices(states[0]) + indices(states[1])


state1 = ((0, ((300, 256, 8),)),)
cases = {
    # name: (shared, first layout, second layout, layout tail, planner tail)
    "equal_tp1": (1, layout(), peer(), tail_layout(3), tail_planner([0, 1, 2, 3], [5, 6, 7, 8])),
    "fan_in_tp4_to_tp2": (1, layout(tp=4, tp_rank=1), peer(tp=2, tp_rank=0), tail_layout(1),
                          tail_planner([1, 2], [3, 4])),
    "fan_out_tp2_to_tp4": (1, layout(tp=2, tp_rank=1), peer(tp=4, tp_rank=3), tail_layout(0),
                           tail_planner([0, 9], [9, 0], max_write=64)),
    "mla_fan_in": (1, layout(mla=True, heads=1, dim=144, tp=2, tp_rank=1),
                   peer(tp=1, n_buffers=4), tail_layout(0), tail_planner([0], [1])),
    "pp2_stage1_to_pp1": (1, layout(pp=2, pp_rank=1, layers=2, first=2),
                          peer(layers=[0, 1, 2, 3], n_buffers=8), tail_layout(0),
                          tail_planner([3], [4])),
    "replicated_heads_tp16_to_tp4": (1, layout(heads=4, tp=16, tp_rank=5),
                                     peer(tp=4, tp_rank=1), tail_layout(0),
                                     tail_planner([0, 1], [1, 2])),
    "state_single_slot": (1, layout(states=state1), peer(states=True), tail_layout(0, [[7]]),
                          tail_planner([0], [0], states=([[1]], [[2]]))),
    "independent": (0, layout(), layout(tp=2, tp_rank=1), tail_layout(5),
                    tail_planner([0], [0])),
    "tp_size_2pow32": (1, layout(tp=0xFFFFFFFF, tp_rank=7), peer(tp=0xFFFFFFFF, tp_rank=0),
                       tail_layout(0), tail_planner([0], [0])),
    "tp1024_pp4_fan_in": (1, layout(tp=1024, tp_rank=1023, pp=4, pp_rank=3, heads=1, mla=True,
                                    dim=64), peer(tp=1, n_buffers=4), tail_layout(0),
                          tail_planner([0], [0])),
    "offset_near_2pow64": (1, layout(offset=0xFFFFFFFFFFFFFF00), peer(), tail_layout(0),
                           tail_planner([31], [31])),
    "page_size_2pow32": (1, layout(page=0xFFFFFFFF, heads=0xFFFFFFFF, dim=0xFFFFFFFF), peer(),
                         tail_layout(0), tail_planner([0], [0])),
}
for name, (shared, a, b, lt, pt) in cases.items():
    write("layout", name, bytes([shared]) + a + b + lt)
    write("planner", name, bytes([shared]) + a + b + pt)
write("layout", "empty", b"")
write("planner", "empty", b"")


# corpus/basp_frames: cap (4 bytes, little-endian), split seed, then a CAF
# connection's bytes (BASP headers are big-endian).
def basp(op, length, payload=b""):
    return bytes([op, 0, 0, 0]) + struct.pack(">IQQQ", length, 0, 0, 0) + payload


def basp_seed(cap, seed, stream):
    return struct.pack("<I", cap) + bytes([seed]) + stream


handshake = basp(1, 40, b"\x01" * 40)
write("basp_frames", "handshake", basp_seed(1 << 20, 7, basp(0, 16, b"\x00" * 16) + handshake))
write("basp_frames", "handshake_then_messages",
      basp_seed(1 << 20, 3, handshake + basp(2, 8, b"\x02" * 8) + basp(6, 0)))
write("basp_frames", "oversized_4gib", basp_seed(1 << 20, 1, basp(2, 0xFFFFFFFF) + b"\x5a" * 64))
write("basp_frames", "oversized_by_one", basp_seed(1024, 9, basp(1, 1025)))
write("basp_frames", "at_the_cap", basp_seed(1024, 5, basp(1, 1024, b"\x00" * 1024)))
write("basp_frames", "unknown_operation", basp_seed(1 << 20, 2, basp(7, 0)))
write("basp_frames", "partial_header", basp_seed(1 << 20, 0, basp(1, 8)[:10]))
write("basp_frames", "payload_short", basp_seed(1 << 20, 4, basp(1, 100, b"\x01" * 60)))
