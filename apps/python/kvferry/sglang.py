"""kvferry as an SGLang transfer backend: SGLang's five classes, SGLang's signatures.

    --disaggregation-transfer-backend kvferry      (after `pip install`, see README)

Each rank process of a prefill or decode server builds one KVManager from what
SGLang hands it (KVArgs, the mode, server_args). The manager starts that rank's
kvferry runtime (one actor system per process) over the buffers in KVArgs.

Where things live, from server_args only:
  * prefill: KVBootstrapServer(host, port) serves the instance's bootstrap in
    SGLang's HTTP process, on --disaggregation-bootstrap-port. Every prefill
    rank registers with it at that port, on dist_init_addr's host when the
    instance spans nodes, on --host otherwise (127.0.0.1 for a wildcard host).
  * decode: the instance's decider lives in the process of decode rank 0
    (TP 0, PP 0). It listens on the decode server's own
    --disaggregation-bootstrap-port, which SGLang leaves unused on decode; the
    other decode ranks find it there, on the same host rule as above. A decode
    and a prefill server on one host therefore need different bootstrap ports.
  * this process's own address (what other instances dial): $KVFERRY_HOST,
    else --host, else (wildcard host) the address of the default route.
  * DP attention (--dp-size N with --enable-dp-attention, or N data-parallel
    replicas without it): each DP group is an instance of its own to kvferry.
    Prefill group g registers with the same bootstrap, in a directory of its
    own ("prefill@host:port/dp<g>"); decode group g's decider is served by
    the group's first rank on the decode bootstrap port + g. A room goes to
    the prefill group SGLang's decode queue names in init(prefill_dp_rank)
    (the router's, bootstrap_room % dp_size, or the group a prefill rank
    registered for the room at the bootstrap when its load_balance_method is
    not follow_bootstrap_room), and no rank of another group hears of it.

poll() is one atomic load in C++ (no lock, no actor call); failure_exception()
raises KVTransferError with the room and the one cause every rank reports.
SGLang's aux buffers are moved whole, row for row (including the row holding
bootstrap_room that decode's metadata gate reads); kvferry keeps its own
16-byte stamp per row in a buffer of its own, in front of SGLang's.
"""

from __future__ import annotations

import ctypes
import dataclasses
import logging
import os
import socket
import threading
import time
from typing import List, Optional

import numpy as np

from kvferry import KVTransferError
from kvferry import _native

logger = logging.getLogger("kvferry.sglang")

try:  # SGLang present: subclass its base classes and share its KVPoll/KVArgs.
    from sglang.srt.disaggregation.base.conn import BaseKVBootstrapServer
    from sglang.srt.disaggregation.base.conn import BaseKVManager
    from sglang.srt.disaggregation.base.conn import BaseKVReceiver
    from sglang.srt.disaggregation.base.conn import BaseKVSender
    from sglang.srt.disaggregation.base.conn import KVArgs
    from sglang.srt.disaggregation.base.conn import KVPoll
    from sglang.srt.disaggregation.base.conn import KVTransferMetric

    SGLANG_PRESENT = True
except ImportError:  # standalone: the same names, kvferry's own.
    from kvferry import KVPoll  # noqa: F401  (SGLang's ints)

    SGLANG_PRESENT = False

    class KVArgs:  # type: ignore[no-redef]
        """What a rank hands its manager; SGLang creates it empty and sets attributes."""

    @dataclasses.dataclass
    class KVTransferMetric:  # type: ignore[no-redef]
        transfer_latency_s: Optional[float] = None
        alloc_latency_s: Optional[float] = None
        transfer_total_bytes: Optional[int] = None

    class BaseKVManager:  # type: ignore[no-redef]
        pass

    class BaseKVSender:  # type: ignore[no-redef]
        pass

    class BaseKVReceiver:  # type: ignore[no-redef]
        pass

    class BaseKVBootstrapServer:  # type: ignore[no-redef]
        pass


STAMP_BYTES = 16  # kvferry's per-row stamp: {room, generation}

# SGLang's state types kvferry moves, and how it indexes them.
STATE_KINDS = {"mamba": "single_slot", "swa": "page_indexed"}

# SGLang's kv_cache_dtype_str → kvferry's dtype names (element size matters for slicing).
DTYPES = {
    "bf16": "bf16", "bfloat16": "bf16", "torch.bfloat16": "bf16",
    "f16": "f16", "fp16": "f16", "float16": "f16", "half": "f16", "torch.float16": "f16",
    "f32": "f32", "fp32": "f32", "float32": "f32", "torch.float32": "f32",
    "fp8_e4m3": "fp8_e4m3", "float8_e4m3fn": "fp8_e4m3", "torch.float8_e4m3fn": "fp8_e4m3",
    "fp8_e5m2": "fp8_e5m2", "float8_e5m2": "fp8_e5m2", "torch.float8_e5m2": "fp8_e5m2",
    "int8": "int8",
}
DTYPE_BYTES = {"bf16": 2, "f16": 2, "f32": 4, "fp8_e4m3": 1, "fp8_e5m2": 1, "int8": 1}

_node_lock = threading.Lock()
_node: Optional[_native.Node] = None


def process_node() -> _native.Node:
    """This process's kvferry actor system (one per process, made on first use)."""
    global _node
    with _node_lock:
        if _node is None:
            _node = _native.Node()
        return _node


# -- addresses, from server_args only ------------------------------------------------

WILDCARDS = ("", "0.0.0.0", "::", "[::]")


def _arg(server_args, name, default):
    value = getattr(server_args, name, default)
    return default if value is None else value


def instance_host(server_args) -> str:
    """Where this instance's own ranks reach its rank-0 services (bootstrap, decider)."""
    dist = _arg(server_args, "dist_init_addr", "")
    if int(_arg(server_args, "nnodes", 1)) > 1 and dist:
        return dist.rsplit(":", 1)[0].strip("[]")
    host = _arg(server_args, "host", "127.0.0.1")
    return "127.0.0.1" if host in WILDCARDS else host


def prefill_instance_name(host, port) -> str:
    """A prefill instance's name, from --host as SGLang hands it to KVBootstrapServer: the
    bootstrap and the prefill ranks name the instance alike."""
    return f"prefill@{'127.0.0.1' if host in WILDCARDS else host}:{port}"


def own_host(server_args) -> str:
    """The address other instances dial to reach this process."""
    if os.environ.get("KVFERRY_HOST"):
        return os.environ["KVFERRY_HOST"]
    host = _arg(server_args, "host", "127.0.0.1")
    if host not in WILDCARDS:
        return host
    target = instance_host(server_args)
    if target.startswith("127."):
        target = "10.255.255.255"  # any routable address: no packet is sent
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((target, 9))
            return s.getsockname()[0]
    except OSError:
        return "127.0.0.1"


def split_addr(bootstrap_addr: str):
    """"host:port" → (host, port), or ValueError naming the value."""
    if not isinstance(bootstrap_addr, str) or ":" not in bootstrap_addr:
        raise ValueError(f"bootstrap_addr {bootstrap_addr!r}; expected \"host:port\"")
    host, port = bootstrap_addr.rsplit(":", 1)
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"bootstrap_addr {bootstrap_addr!r}; expected \"host:port\" "
                         "with a port from 1 to 65535")
    return host, int(port)


# -- memory kinds ------------------------------------------------------------------

_cuda = None


def _cuda_driver():
    """libcuda, initialised, or None where there is no driver."""
    global _cuda
    if _cuda is None:
        try:
            lib = ctypes.CDLL("libcuda.so.1")
            _cuda = lib if lib.cuInit(0) == 0 else False
        except OSError:
            _cuda = False
    return _cuda or None


def is_device_pointer(ptr: int) -> bool:
    """True where the CUDA driver says `ptr` is device memory."""
    lib = _cuda_driver()
    if lib is None:
        return False
    memtype = ctypes.c_uint(0)
    CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_MEMORYTYPE_DEVICE = 2, 2
    rc = lib.cuPointerGetAttribute(ctypes.byref(memtype), CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                   ctypes.c_uint64(ptr))
    return rc == 0 and memtype.value == CU_MEMORYTYPE_DEVICE


def _on_device(kinds, ptrs, what) -> List[bool]:
    if kinds is None:
        return [is_device_pointer(p) for p in ptrs]
    if len(kinds) != len(ptrs):
        raise ValueError(f"kv_data_mem_kinds has {len(kinds)} entries for {len(ptrs)} {what} "
                         "buffers; expected one per buffer")
    out = []
    for k in kinds:
        name = str(getattr(k, "value", k)).lower()
        if name in ("vram", "cuda", "device", "gpu"):
            out.append(True)
        elif name in ("dram", "cpu", "host"):
            out.append(False)
        else:
            raise ValueError(f"memory kind {k!r}; expected VRAM/cuda/device or DRAM/cpu/host")
    return out


# -- the manager -------------------------------------------------------------------

@dataclasses.dataclass
class PrefillInfo:
    """What SGLang's decode queue reads of a prefill instance (prefill_info_table)."""

    dp_size: int = 1
    follow_bootstrap_room: bool = True
    attn_tp_size: Optional[int] = None
    attn_cp_size: int = 1
    pp_size: int = 1
    page_size: Optional[int] = None
    kv_cache_dtype: Optional[str] = None


def _sglang_attn_dp_rank() -> Optional[int]:
    """SGLang's own attention-DP rank of this process, where SGLang set it up."""
    try:
        from sglang.srt.layers.dp_attention import get_attention_dp_rank
        return int(get_attention_dp_rank())
    except Exception:  # not SGLang, or DP attention not initialised in this process
        return None


@dataclasses.dataclass
class DPShape:
    """Where a rank sits with DP: its group, and its place in the group's attention TP."""

    dp_size: int = 1
    group: Optional[int] = None  # None: no DP groups (dp_size 1)
    tp_size: int = 1             # the group's attention-TP size
    tp_rank: int = 0             # this rank's place in it


def dp_shape(args, server_args, role: str) -> DPShape:
    """This rank's DP group from SGLang's sizes, as SGLang derives it.

    With DP attention a group is tp_size / dp_size attention-TP ranks; its
    rank is SGLang's attention-DP rank (or, on prefill, where engine_rank is
    the global TP rank, engine_rank // attn_tp_size; else kv_args.system_dp_rank).
    Without it, each of the dp_size replicas is a whole TP group and its rank
    is kv_args.system_dp_rank. ValueError names the value that does not fit.
    """
    dp = int(_arg(server_args, "dp_size", 1))
    tp = int(_arg(server_args, "tp_size", 1))
    engine = int(_arg(args, "engine_rank", 0))
    if dp < 1 or dp > 1024:
        raise ValueError(f"dp_size {dp}; expected 1 to 1024")
    if tp < 1:
        raise ValueError(f"tp_size {tp}; expected at least 1")
    if dp == 1:
        return DPShape(1, None, tp, engine % tp)
    system_dp_rank = getattr(args, "system_dp_rank", None)
    if bool(_arg(server_args, "enable_dp_attention", False)):
        if tp % dp:
            raise ValueError(f"tp_size {tp} with dp_size {dp} and DP attention; expected tp_size "
                             "a multiple of dp_size (attention-TP groups of tp_size / dp_size)")
        attn = tp // dp
        group = _sglang_attn_dp_rank()
        if group is None and role == "prefill":
            group = engine // attn  # prefill's engine_rank is the global TP rank
        if group is None and system_dp_rank is not None:
            group = int(system_dp_rank)
        if group is None:
            raise ValueError(f"decode rank with engine_rank {engine}, dp_size {dp}: its attention-"
                             "DP rank is not known; expected SGLang's DP attention set up in this "
                             "process or kv_args.system_dp_rank")
        shape = DPShape(dp, group, attn, engine % attn)
    else:
        if system_dp_rank is None:
            raise ValueError(f"dp_size {dp} without DP attention: kv_args.system_dp_rank is not "
                             "set; expected the rank's data-parallel replica (0 to "
                             f"{dp - 1})")
        shape = DPShape(dp, int(system_dp_rank), tp, engine % tp)
    if not 0 <= shape.group < dp:
        raise ValueError(f"DP rank {shape.group}; expected 0 to {dp - 1} (dp_size {dp})")
    return shape


def _mode_name(mode) -> str:
    name = str(getattr(mode, "value", mode)).lower()
    if name not in ("prefill", "decode"):
        raise ValueError(f"disaggregation_mode {mode!r}; expected prefill or decode")
    return name


def _list(args, name, default=None):
    value = getattr(args, name, default)
    return list(value) if value is not None else default


class KVManager(BaseKVManager):
    """One rank process's kvferry runtime over the buffers SGLang allocated."""

    enable_deferred_decode_kv_release = False
    supports_deferred_decode_kv_release = False
    supports_host_destination = False
    supports_role_switch = False

    def __init__(self, args, disaggregation_mode, server_args, is_mla_backend=False):
        self.kv_args = args
        self.server_args = server_args
        self.is_mla_backend = bool(is_mla_backend)
        self.role = _mode_name(disaggregation_mode)
        self.prefill_info_table = {}
        self.failure_records = {}

        self.dp = dp_shape(args, server_args, self.role)
        self.dp_size, self.dp_group = self.dp.dp_size, self.dp.group
        # How a room finds its prefill DP group without the router's rank:
        # bootstrap_room % dp_size, or (another load_balance_method, or
        # SGLang's force flag) the group the prefill rank registers for it.
        self.load_balance_method = str(_arg(server_args, "load_balance_method",
                                            "follow_bootstrap_room"))
        self.force_query = os.environ.get("SGLANG_DISAGGREGATION_FORCE_QUERY_PREFILL_DP_RANK",
                                          "").lower() in ("1", "true", "yes")
        self.rooms_follow = (self.load_balance_method == "follow_bootstrap_room"
                             and not self.force_query)
        self.tp_size = self.dp.tp_size  # the DP group's attention TP
        self.pp_size = int(_arg(server_args, "pp_size", 1))
        self.tp_rank = self.dp.tp_rank
        self.pp_rank = int(_arg(args, "pp_rank", 0))
        self.bootstrap_port = int(_arg(server_args, "disaggregation_bootstrap_port", 8998))
        self.host = own_host(server_args)
        self.service_host = instance_host(server_args)

        kv_ptrs = _list(args, "kv_data_ptrs", [])
        kv_lens = _list(args, "kv_data_lens", [])
        kv_items = _list(args, "kv_item_lens", [])
        if not kv_ptrs:
            raise ValueError("kv_args.kv_data_ptrs is empty; expected one pointer per KV buffer")
        self.page_size = int(_arg(args, "page_size", 1))
        # End-to-end KV checksums, checked by the decode ranks (kvferry's own):
        # $KVFERRY_CHECKSUM, else SGLang's --disaggregation-enable-kv-checksum.
        sglang_flag = bool(_arg(server_args, "disaggregation_enable_kv_checksum", False))
        wanted = os.environ.get("KVFERRY_CHECKSUM", "xxh3" if sglang_flag else "off")
        self.checksum = wanted if self.role == "decode" else "off"
        self.num_pages = min(int(n) // int(i) for n, i in zip(kv_lens, kv_items))
        mla = self.is_mla_backend
        if not mla and len(kv_ptrs) % 2:
            raise ValueError(f"{len(kv_ptrs)} KV buffers; expected K and V of every layer "
                             "(an even count) without MLA")
        layers = len(kv_ptrs) if mla else len(kv_ptrs) // 2
        layer_ids = _list(args, "kv_layer_ids")
        if not layer_ids or len(layer_ids) not in (layers, len(kv_ptrs)):
            start = int(_arg(args, "prefill_start_layer", 0))
            layer_ids = list(range(start, start + layers))
        layer_ids = [int(x) for x in layer_ids[:layers]]
        kv_heads = 1 if mla else int(_arg(args, "kv_head_num", 1))
        total_heads = 1 if mla else int(_arg(args, "total_kv_head_num", kv_heads))
        dtype = self._dtype(str(_arg(args, "kv_cache_dtype_str", "auto")), kv_items[0], kv_heads)
        per_head = int(kv_items[0]) // (self.page_size * kv_heads)
        head_dim = per_head // DTYPE_BYTES[dtype]
        kinds = getattr(args, "kv_data_mem_kinds", None)

        # kvferry's stamp rows, then SGLang's aux buffers unchanged.
        aux_ptrs = _list(args, "aux_data_ptrs", [])
        aux_lens = _list(args, "aux_data_lens", [])
        aux_items = _list(args, "aux_item_lens", [])
        self.aux_rows = int(aux_lens[0]) // int(aux_items[0]) if aux_ptrs else 0
        self._stamps = np.zeros((max(self.aux_rows, 1), STAMP_BYTES), dtype=np.uint8)
        if aux_ptrs:
            aux_ptrs = [self._stamps.ctypes.data] + aux_ptrs
            aux_lens = [self._stamps.nbytes] + aux_lens
            aux_items = [STAMP_BYTES] + aux_items
        self.aux_row_bytes = sum(int(i) for i in aux_items[1:])

        self.state_kinds = []
        states = []
        state_types = _list(args, "state_types", []) or []
        for i, t in enumerate(state_types):
            name = str(getattr(t, "value", t))
            if name not in STATE_KINDS:
                raise ValueError(f"state type {name!r} (component {i}); kvferry moves "
                                 f"{', '.join(STATE_KINDS)}")
            ptrs = list(args.state_data_ptrs[i])
            states.append((STATE_KINDS[name], ptrs, list(args.state_data_lens[i]),
                           list(args.state_item_lens[i]), [is_device_pointer(p) for p in ptrs]))
            self.state_kinds.append(STATE_KINDS[name])
        self.state_item_bytes = [sum(int(x) for x in s[3]) for s in states]
        self.kv_page_bytes = sum(int(i) for i in kv_items)

        node = process_node()
        group = "" if self.dp_group is None else f"/dp{self.dp_group}"
        if self.role == "prefill":
            host = _arg(server_args, "host", "127.0.0.1")
            self.instance = prefill_instance_name(host, self.bootstrap_port) + group
            if self.dp_size > 1:
                self._say_dp_routing(node)
            where = dict(bootstrap_host=self.service_host, bootstrap_port=self.bootstrap_port,
                         control_host=self.host,
                         bootstrap_dp_group=-1 if self.dp_group is None else self.dp_group,
                         bootstrap_dp_size=self.dp_size)
        else:
            self.instance = f"decode@{self.service_host}:{self.bootstrap_port}{group}"
            # One decider per decode DP group: group g's on the bootstrap port + g.
            decider_at = self.bootstrap_port + (self.dp_group or 0)
            if decider_at > 65535:
                raise ValueError(f"disaggregation_bootstrap_port {self.bootstrap_port} with DP "
                                 f"group {self.dp_group}: the group's decider port {decider_at} "
                                 "is past 65535; expected a lower bootstrap port")
            self.decider_port = None
            if self.tp_rank == 0 and self.pp_rank == 0:
                bind = _arg(server_args, "host", "127.0.0.1")
                if int(_arg(server_args, "nnodes", 1)) > 1:
                    bind = "0.0.0.0"  # the ranks of the other nodes dial dist_init_addr's host
                self.decider_port = node.serve_decider(self.instance, self.tp_size, self.pp_size,
                                                       bind, decider_at)
            where = dict(decider_host=self.service_host, decider_port=decider_at)
        self.rank = _native.Rank(
            node, self.role, self.instance, self.tp_rank, self.tp_size, self.page_size, dtype,
            layers, total_heads, kv_heads, head_dim, mla, kv_ptrs, kv_lens, kv_items,
            aux_ptrs, aux_lens, aux_items,
            transport=os.environ.get("KVFERRY_TRANSPORT", "auto"), layer_ids=layer_ids,
            pp_rank=self.pp_rank, pp_size=self.pp_size,
            kv_on_device=_on_device(kinds, kv_ptrs, "KV"), states=states, data_host=self.host,
            checksum=self.checksum, **where)
        logger.info("kvferry %s rank tp%d pp%d of %s: %d KV buffers, %d pages, data at %s",
                    self.role, self.tp_rank, self.pp_rank, self.instance, len(kv_ptrs),
                    self.num_pages, self.rank.data_endpoint)

    def _dtype(self, name, item_len, kv_heads):
        dtype = DTYPES.get(name.lower())
        if dtype is None:  # "auto": only the element size matters, and both sides agree
            per = int(item_len) // (self.page_size * kv_heads)
            dtype = "bf16" if per % 2 == 0 else "int8"
        if int(item_len) % (self.page_size * kv_heads * DTYPE_BYTES[dtype]):
            raise ValueError(f"kv item length {item_len}; expected a multiple of page_size "
                             f"{self.page_size} x kv heads {kv_heads} x {DTYPE_BYTES[dtype]} "
                             f"bytes ({dtype})")
        return dtype

    def _say_dp_routing(self, node):
        """Prefill with DP groups: tells the bootstrap how rooms find their group.

        Said before the rank registers, so that a decode rank that sees a
        registered rank also sees the routing. Retried while the bootstrap
        starts (up to $KVFERRY_BOOTSTRAP_WAIT_S, 30 s); a routing the
        instance's other ranks contradict is refused, naming both.
        """
        wait = float(os.environ.get("KVFERRY_BOOTSTRAP_WAIT_S", "30"))
        end = time.monotonic() + wait
        while True:
            try:
                node.say_dp_routing(self.service_host, self.bootstrap_port, self.rooms_follow, 500)
                return
            except ValueError as e:
                if "not reached" not in str(e) or time.monotonic() >= end:
                    raise ValueError(f"{self.instance}: load_balance_method "
                                     f"{self.load_balance_method!r}: {e}") from None
                time.sleep(0.1)

    def register_room(self, room: int) -> Optional[str]:
        """Prefill: registers this rank's DP group for `room` (None, or why not)."""
        try:
            process_node().register_room_dp_group(self.service_host, self.bootstrap_port,
                                                  int(room), int(self.dp_group))
            return None
        except ValueError as e:
            return str(e)

    def register_to_bootstrap(self):
        """The rank registered with its bootstrap when it started (it retries on its own)."""

    def try_ensure_parallel_info(self, bootstrap_addr: str) -> bool:
        """Decode: the prefill instance's DP shape, asked of its bootstrap once (False: not yet).

        kvferry resolves the prefill ranks per room; SGLang's decode queue needs
        dp_size to pick a room's prefill DP group (bootstrap_room % dp_size).
        """
        if bootstrap_addr in self.prefill_info_table:
            return True
        host, port = split_addr(bootstrap_addr)
        node = process_node()
        groups = node.prefill_dp_size(host, port, 500)
        if not groups:  # unreachable, or no prefill rank registered yet: SGLang asks again
            return False
        follows = True
        if groups > 1:
            follows = node.prefill_dp_routing(host, port, 500)
            if follows is None:
                return False
        self.prefill_info_table[bootstrap_addr] = PrefillInfo(
            dp_size=int(groups), follow_bootstrap_room=bool(follows), page_size=self.page_size)
        _known_bootstraps.add(bootstrap_addr)
        return True

    def prefill_groups(self, bootstrap_addr: str) -> int:
        """The prefill instance's DP groups as known (1 until try_ensure_parallel_info says)."""
        info = self.prefill_info_table.get(bootstrap_addr)
        return info.dp_size if info is not None else 1

    def prefill_down(self, bootstrap_addr: str, prefill_dp_rank=None) -> Optional[str]:
        """Decode: why the prefill instance (its DP group) at bootstrap_addr is known down."""
        group = -1
        if prefill_dp_rank is not None and self.prefill_groups(bootstrap_addr) > 1:
            group = int(prefill_dp_rank)
        return self.rank.prefill_down(*split_addr(bootstrap_addr), group)

    def should_verify_kv_checksum(self, bootstrap_addr: str) -> bool:
        # kvferry checks the KV inside the transfer when the decode manager
        # has checksums on (SGLang's --disaggregation-enable-kv-checksum or
        # KVFERRY_CHECKSUM=xxh3): a mismatch is the room's verdict on every
        # rank (checksum_mismatch), and SGLang's own Adler-32 pass over the
        # whole KV, which a TP-sliced rank could not pass, is not needed.
        return False

    def is_abort_release_safe(self, *args, **kwargs) -> bool:
        return True

    def clear_deferred_abort_state(self, room) -> None:
        pass

    def teardown(self) -> None:
        self.rank = None


# -- one room ---------------------------------------------------------------------

def _indices(kv_indices, what: str, limit: int) -> List[int]:
    """Page indices as ints, checked against the pool (ValueError naming the value)."""
    a = np.asarray(kv_indices)
    if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
        raise ValueError(f"{what}: array of dtype {a.dtype} and shape {a.shape}; expected a "
                         "one-dimensional integer array (int32) of page indices")
    if a.size and (int(a.min()) < 0 or int(a.max()) >= limit):
        bad = int(a.min()) if int(a.min()) < 0 else int(a.max())
        raise ValueError(f"{what}: page index {bad}; expected 0 to {limit - 1}")
    return a.astype(np.int64).tolist()


def _state_lists(mgr: KVManager, state_indices, what: str) -> List[List[int]]:
    """SGLang's per-type state indices → one list per kvferry state component."""
    if not mgr.state_kinds:
        return []
    if state_indices is None or len(state_indices) != len(mgr.state_kinds):
        n = 0 if state_indices is None else len(state_indices)
        raise ValueError(f"{what}: {n} state index lists; expected one per state type "
                         f"({len(mgr.state_kinds)})")
    out = []
    for i, s in enumerate(state_indices):
        a = np.atleast_1d(np.asarray(s if s is not None else [], dtype=np.int64))
        out.append(a.tolist())
    return out


class _Room:
    """What a sender and a receiver share: the poll, the failure, the metric."""

    def __init__(self, mgr: KVManager, bootstrap_room):
        if not isinstance(mgr, KVManager):
            raise ValueError(f"mgr {mgr!r}; expected a kvferry.sglang.KVManager")
        if bootstrap_room is None or not 0 <= int(bootstrap_room) < 2**64:
            raise ValueError(f"bootstrap_room {bootstrap_room!r}; expected an int from 0 to 2**64-1")
        self.kv_mgr = mgr
        self.bootstrap_room = int(bootstrap_room)
        self._native = None
        self._error: Optional[str] = None  # a bad call before the room exists natively
        self._started = None
        self._ended = None
        self._bytes = 0
        self.abort_notified = False
        self.require_staging = False

    def poll(self):
        if self._error is not None:
            return KVPoll.Failed
        state = self._native.poll() if self._native is not None else KVPoll.Bootstrapping
        if state == KVPoll.Success and self._ended is None:
            self._ended = time.perf_counter()
        return state

    @property
    def conclude_state(self):
        state = self.poll()
        return state if state in (KVPoll.Failed, KVPoll.Success) else None

    def failure_text(self) -> str:
        if self._error is not None:
            return self._error
        if self._native is not None:
            text = self._native.failure()
            if text:
                # "KVTransferError(room 42#7): peer_down: ..." → "peer_down: ...": the
                # exception names the room already.
                return text.split("): ", 1)[1] if text.startswith("KVTransferError(") else text
        return "the room has not failed"

    def failure_exception(self):
        raise KVTransferError(self.bootstrap_room, self.failure_text())

    def get_transfer_metric(self):
        latency = None
        if self._started is not None and self._ended is not None:
            latency = self._ended - self._started
        return KVTransferMetric(transfer_latency_s=latency, transfer_total_bytes=self._bytes)

    def is_abort_release_safe(self) -> bool:
        return self._native is None or self._native.released()

    def ensure_abort_notified(self, force_arm: bool = False) -> None:
        self.abort_notified = True

    def abort(self):
        if self._native is not None:
            self._native.abort()
        elif self._error is None:
            self._error = f"room {self.bootstrap_room} aborted before it started"

    def clear(self):
        if self._native is not None:
            self._native.clear()


class KVSender(_Room, BaseKVSender):
    """Prefill side of one request."""

    def __init__(self, mgr, bootstrap_addr, bootstrap_room, req_has_disagg_prefill_dp_rank=False):
        _Room.__init__(self, mgr, bootstrap_room)
        if mgr.role != "prefill":
            raise ValueError(f"a KVSender on a {mgr.role} manager; expected a prefill manager")
        self.bootstrap_addr = bootstrap_addr
        self._total = None
        self._sent = 0
        self._last_sent = False
        self._prefix_popped = False
        self._native = mgr.rank.sender(self.bootstrap_room)
        dp, group = mgr.dp_size, mgr.dp_group
        if dp > 1 and not req_has_disagg_prefill_dp_rank:
            if not mgr.rooms_follow:
                # Decode asks the bootstrap which group holds the room.
                self._error = mgr.register_room(self.bootstrap_room)
            elif self.bootstrap_room % dp != group:
                # Decode names the group bootstrap_room % dp_size: a room
                # another group holds would wait for ranks that never hear of it.
                self._error = (f"follow_bootstrap_room conflict: dispatched to dp_rank {group} "
                               f"but bootstrap_room {self.bootstrap_room} implies dp_rank "
                               f"{self.bootstrap_room % dp}. Set "
                               "SGLANG_DISAGGREGATION_FORCE_QUERY_PREFILL_DP_RANK=1 to allow "
                               "mixed routing.")
            if self._error is not None:
                self._native.abort()

    def init(self, num_kv_indices, aux_index=None):
        if self._total is not None:
            raise ValueError(f"room {self.bootstrap_room}: init called twice")
        n = int(num_kv_indices)
        if n < 0:
            raise ValueError(f"num_kv_indices {num_kv_indices}; expected 0 or more pages")
        aux = self._aux(aux_index)
        self._total = n
        self._native.init(n, aux)

    def _aux(self, aux_index):
        mgr = self.kv_mgr
        if mgr.aux_rows == 0:
            return None
        if aux_index is None or not 0 <= int(aux_index) < mgr.aux_rows:
            raise ValueError(f"room {self.bootstrap_room}: aux_index {aux_index!r}; expected 0 "
                             f"to {mgr.aux_rows - 1}")
        return int(aux_index)

    def should_send_kv_chunk(self, num_pages, last_chunk):
        # A last chunk with no pages still carries the states and the aux row.
        return num_pages > 0 or bool(last_chunk)

    def pop_decode_prefix_len(self) -> int:
        # SGLang pops the value the decode side sent (0 once taken, and
        # without reuse); it is known once poll() reads WaitingForInput.
        if self._prefix_popped:
            return 0
        self._prefix_popped = True
        return int(self._native.decode_prefix_tokens)

    def send(self, kv_indices, state_indices=None, num_kv_tokens=None, **_ignored):
        room = self.bootstrap_room
        if self._total is None:
            raise ValueError(f"room {room}: send before init; expected init(num_kv_indices, "
                             "aux_index) first")
        if self._last_sent:
            raise KVTransferError(room, f"room {room}: send after the last chunk "
                                        f"({self._total} pages already sent)")
        mgr = self.kv_mgr
        pages = _indices(kv_indices, f"room {room}", mgr.num_pages)
        if self._sent + len(pages) > self._total:
            raise ValueError(f"room {room}: {self._sent + len(pages)} pages sent in all; "
                             f"expected {self._total} (init's num_kv_indices)")
        done = self._sent + len(pages) == self._total
        last = done and (not mgr.state_kinds or state_indices is not None)
        states = _state_lists(mgr, state_indices, f"room {room}") if last else []
        if self._started is None:
            self._started = time.perf_counter()
        self._native.send(pages, last, states)
        if self._sent == 0 and pages:
            # The first page's tokens the decode side holds do not move.
            held = self._native.decode_prefix_tokens % mgr.page_size
            self._bytes -= held * mgr.kv_page_bytes // mgr.page_size
        self._sent += len(pages)
        self._bytes += len(pages) * mgr.kv_page_bytes
        if last:
            self._last_sent = True
            self._bytes += mgr.aux_row_bytes
            for s, per in zip(states, mgr.state_item_bytes):
                self._bytes += len(s) * per


class KVReceiver(_Room, BaseKVReceiver):
    """Decode side of one request."""

    supports_host_destination = False  # kvferry writes into the KV pool only

    def __init__(self, mgr, bootstrap_addr, bootstrap_room=None):
        _Room.__init__(self, mgr, bootstrap_room)
        if mgr.role != "decode":
            raise ValueError(f"a KVReceiver on a {mgr.role} manager; expected a decode manager")
        self.bootstrap_addr = bootstrap_addr
        self.bootstrap_infos = []
        self._where = split_addr(bootstrap_addr)
        self._metadata_sent = False
        # SGLang's decode queue calls init() once it knows the room's prefill
        # DP group; a room no prefill rank registers fails by this deadline
        # instead of waiting without a bound.
        self._resolve_by = time.monotonic() + float(
            os.environ.get("KVFERRY_DP_RESOLVE_TIMEOUT_S", "60"))

    def poll(self):
        if (self._native is None and self._error is None
                and time.monotonic() > self._resolve_by):
            self._error = (f"room {self.bootstrap_room}: its prefill DP group was not resolved "
                           f"in {os.environ.get('KVFERRY_DP_RESOLVE_TIMEOUT_S', '60')} s: no "
                           f"prefill rank of the instance at {self.bootstrap_addr} registered "
                           "the room, and the router named no prefill_dp_rank")
        return _Room.poll(self)

    def init(self, prefill_dp_rank=0):
        if self._native is not None or self._error is not None:
            return
        groups = self.kv_mgr.prefill_groups(self.bootstrap_addr)
        group = 0 if prefill_dp_rank is None else prefill_dp_rank
        if not isinstance(group, (int, np.integer)) or not 0 <= int(group) < groups:
            self._error = (f"room {self.bootstrap_room}: prefill_dp_rank {prefill_dp_rank!r}; "
                           f"expected 0 to {groups - 1} (the prefill instance at "
                           f"{self.bootstrap_addr} has {groups} DP groups)")
            return
        self.prefill_dp_rank = int(group)
        dp_group = int(group) if groups > 1 else -1
        self._native = self.kv_mgr.rank.receiver(self.bootstrap_room, *self._where, dp_group)
        self.bootstrap_infos = [self._where]

    def send_metadata(self, kv_indices, aux_index=None, state_indices=None,
                      decode_prefix_len=None, destination=None):
        room = self.bootstrap_room
        if self._native is None:
            raise ValueError(f"room {room}: send_metadata before init; expected "
                             "init(prefill_dp_rank) first")
        if self._metadata_sent:
            raise ValueError(f"room {room}: send_metadata called twice")
        prefix = 0 if decode_prefix_len is None else int(decode_prefix_len)
        if prefix < 0:
            raise ValueError(f"room {room}: decode_prefix_len {decode_prefix_len}; expected 0 "
                             "or more tokens")
        if destination is not None and str(getattr(destination, "value", destination)) != "device":
            raise ValueError(f"room {room}: destination {destination!r}; kvferry writes into "
                             "the KV pool (expected device)")
        mgr = self.kv_mgr
        pages = _indices(kv_indices, f"room {room}", mgr.num_pages)
        aux = None
        if mgr.aux_rows:
            if aux_index is None or not 0 <= int(aux_index) < mgr.aux_rows:
                raise ValueError(f"room {room}: aux_index {aux_index!r}; expected 0 to "
                                 f"{mgr.aux_rows - 1}")
            aux = int(aux_index)
        states = _state_lists(mgr, state_indices, f"room {room}")
        self._started = time.perf_counter()
        self._native.init(pages, aux, states, prefix)
        self._metadata_sent = True
        # The first page's tokens below the prefix stay as they are.
        held = (prefix % mgr.page_size) * mgr.kv_page_bytes // mgr.page_size if pages else 0
        self._bytes = len(pages) * mgr.kv_page_bytes - held + mgr.aux_row_bytes


# Bootstraps a kvferry decode manager of this process resolved: SGLang's
# CommonKVReceiver.query_prefill_dp_ranks asks kvferry for these (the
# plugin's hook) and SGLang's own HTTP bootstrap for any other.
_known_bootstraps = set()
QUERY_BATCH = 65536


def is_kvferry_bootstrap(bootstrap_addr) -> bool:
    return bootstrap_addr in _known_bootstraps


def query_prefill_dp_ranks(bootstrap_addr: str, bootstrap_rooms) -> dict:
    """The prefill DP group of each room a prefill rank registered, as SGLang's
    CommonKVReceiver.query_prefill_dp_ranks answers: {"<room>": group}
    (rooms not registered are absent; {} when the bootstrap is unreachable)."""
    host, port = split_addr(bootstrap_addr)
    rooms = [int(r) for r in bootstrap_rooms]
    for r in rooms:
        if not 0 <= r < 2**64:
            raise ValueError(f"bootstrap_room {r}; expected an int from 0 to 2**64-1")
    out = {}
    for i in range(0, len(rooms), QUERY_BATCH):  # the bootstrap answers at most this many at once
        found = process_node().query_room_dp_groups(host, port, rooms[i:i + QUERY_BATCH])
        out.update({str(room): int(group) for room, group in found.items()})
    return out


class KVBootstrapServer(BaseKVBootstrapServer):
    """A prefill instance's bootstrap, served in the calling process on host:port."""

    def __init__(self, host, port, *args, **kwargs):
        self.host = host
        self.port = int(port)
        bind = host if host else "0.0.0.0"
        self.instance = prefill_instance_name(bind, self.port)
        self.port = process_node().serve_bootstrap(self.instance, bind, self.port)
        logger.info("kvferry bootstrap of %s on %s:%d", self.instance, bind, self.port)

    def run(self):
        """The bootstrap runs in kvferry's actor system from the constructor on."""

    def close(self):
        """It stops with the process."""


__all__ = [
    "KVArgs", "KVPoll", "KVManager", "KVSender", "KVReceiver", "KVBootstrapServer",
    "KVTransferError", "KVTransferMetric", "SGLANG_PRESENT",
]
